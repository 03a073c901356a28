package egresslog

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// TestInspectEnvRoundTrips: the inspecting rules of a spec reach the proxy as they were
// normalised, tunnel-only rules stay out of the value, and a value that is not that form or
// that the grammar refuses is an error, never a narrower policy.
func TestInspectEnvRoundTrips(t *testing.T) {
	spec, err := sandbox.NewSpec("k", sandbox.WithAllowlist(
		sandbox.EgressRule{Host: "pypi.org"},
		sandbox.EgressRule{Host: "api.example", Methods: []string{"HEAD", "GET"}, Paths: []string{"/v1/**", "/repos/*/issues"}},
		sandbox.EgressRule{Host: "*.paths.example", Paths: []string{"/x"}},
		sandbox.EgressRule{Host: "m.example", Methods: []string{"POST"}},
		sandbox.EgressRule{Host: "s.example", Methods: []string{"GET"}, Shadow: true},
	))
	if err != nil {
		t.Fatal(err)
	}
	v := FormatInspect(spec.EgressAllow)
	if want := "api.example methods=GET;HEAD paths=/repos/*/issues;/v1/**,*.paths.example methods= paths=/x,m.example methods=POST paths=,s.example methods=GET paths= shadow"; v != want {
		t.Fatalf("FormatInspect = %q, want %q", v, want)
	}
	got, err := ParseInspect(v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, spec.EgressAllow[1:]) {
		t.Fatalf("ParseInspect = %+v, want %+v", got, spec.EgressAllow[1:])
	}
	if got, err := ParseInspect(" "); got != nil || err != nil {
		t.Fatalf("empty value: %v %v", got, err)
	}
	for _, bad := range []string{"api.example", "api.example methods=GET", "api.example paths=/x methods=GET",
		"api.example methods=GET paths=/x extra", "api.example methods=GET paths=/x shadow extra", "api.example methods= paths=", "* methods=GET paths=",
		"api.example methods=get paths=", "api.example methods=GET paths=/a/../b", "a.example methods=GET paths=,"} {
		if _, err := ParseInspect(bad); !errors.Is(err, ErrInvalidInspect) {
			t.Errorf("ParseInspect(%q) = %v, want ErrInvalidInspect", bad, err)
		}
	}
}

// TestCredentialsEnvRoundTrips: the credentials reach the proxy with their placeholders, the
// inspect value never holds them, and a refused value's error never quotes the secret.
func TestCredentialsEnvRoundTrips(t *testing.T) {
	rules := []sandbox.EgressRule{{Host: "api.example", Methods: []string{"GET"}, Credentials: []sandbox.EgressCredential{
		{Header: "Authorization", Env: "TOKEN", Secret: "Bearer s3cret", Paths: []string{"/v1/**"}}}}}
	v, err := FormatCredentials(rules, func(env string) string { return "placeholder-of-" + env + "-0123456789" })
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCredentials(v)
	want := []Credential{{Host: "api.example", Header: "Authorization", Placeholder: "placeholder-of-TOKEN-0123456789",
		Secret: "Bearer s3cret", Methods: []string{"GET"}, Paths: []string{"/v1/**"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseCredentials = %+v (%v), want %+v", got, err, want)
	}
	if strings.Contains(FormatInspect(rules), "s3cret") || strings.Contains(FormatInspect(rules), "TOKEN") {
		t.Fatalf("the inspect value holds a credential: %q", FormatInspect(rules))
	}
	for _, bad := range []string{`[{"host":"api.example","header":"Authorization","placeholder":"short","secret":"s3cret"}]`,
		`[{"host":"api.example","header":"Host","placeholder":"placeholder-of-TOKEN-0123456789","secret":"s3cret","methods":["GET"]}]`,
		`[{"host":"api.example","header":"Authorization","placeholder":"placeholder-of-TOKEN-0123456789","secret":"s3cret"}]`,
		`[{"host":"api-*.example","header":"Authorization","placeholder":"placeholder-of-TOKEN-0123456789","secret":"s3cret","methods":["GET"]}]`,
		`[{"host":"api.example","header":"Authorization","placeholder":"placeholder-of-TOKEN-0123456789","secret":"s3cret","methods":["TRACE"]}]`, `s3cret`} {
		if _, err := ParseCredentials(bad); !errors.Is(err, ErrInvalidInspect) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseCredentials(%q) = %v, want ErrInvalidInspect without the secret", bad, err)
		}
	}
}
