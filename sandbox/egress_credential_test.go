package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestEgressCredentialRefusals: every credential the grammar refuses is refused by NewSpec
// with an *InvalidArgumentError, and no refusal quotes the secret.
func TestEgressCredentialRefusals(t *testing.T) {
	const secret = "the-secret-value"
	ok := EgressCredential{Header: "Authorization", Env: "GH_TOKEN", Secret: secret}
	with := func(f func(*EgressCredential)) []EgressCredential { c := ok; f(&c); return []EgressCredential{c} }
	get := []string{"GET"}
	cases := []struct {
		name    string
		rule    EgressRule
		wantErr string
	}{
		{"on a tunnel", EgressRule{Host: "a.example", Credentials: []EgressCredential{ok}}, "inspects nothing"},
		{"empty header", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Header = "" })}, "not a field name"},
		{"header with colon", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Header = "X:Y" })}, "not a field name"},
		{"framing header", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Header = "Content-Length" })}, "frames or routes"},
		{"host header", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Header = "host" })}, "frames or routes"},
		{"lower-case variable", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Env = "gh_token" })}, "upper-case name"},
		{"variable starting with a digit", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Env = "1X" })}, "upper-case name"},
		{"proxy variable", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Env = "HTTPS_PROXY" })}, "sets itself"},
		{"engine variable", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Env = "MAF_SANDBOX_X" })}, "sets itself"},
		{"empty secret", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Secret = "" })}, "empty or longer"},
		{"secret with a line break", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Secret = secret + "\r\nX: y" })}, "line break"},
		{"bad method", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Methods = []string{"get"} })}, "upper-case HTTP tokens"},
		{"bad path", EgressRule{Host: "a.example", Methods: get, Credentials: with(func(c *EgressCredential) { c.Paths = []string{"/a/../b"} })}, "'..' segments"},
		{"wildcard host", EgressRule{Host: "api-*.example", Methods: get, Credentials: []EgressCredential{ok}}, "binds to one exact host name"},
		{"one-character wildcard host", EgressRule{Host: "api-?.example", Methods: get, Credentials: []EgressCredential{ok}}, "binds to one exact host name"},
		{"class wildcard host", EgressRule{Host: "api-[ab].example", Methods: get, Credentials: []EgressCredential{ok}}, "binds to one exact host name"},
		{"no method list", EgressRule{Host: "a.example", Paths: []string{"/**"}, Credentials: []EgressCredential{ok}}, "no method list"},
		{"TRACE of its own", EgressRule{Host: "a.example", Paths: []string{"/**"}, Credentials: with(func(c *EgressCredential) { c.Methods = []string{"GET", "TRACE"} })}, "TRACE echoes"},
		{"TRACE of its rule", EgressRule{Host: "a.example", Methods: []string{"GET", "TRACE"}, Credentials: []EgressCredential{ok}}, "TRACE echoes"},
		{"TRACK", EgressRule{Host: "a.example", Methods: []string{"TRACK"}, Credentials: []EgressCredential{ok}}, "TRACK echoes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSpec("k", WithAllowlist(tc.rule))
			var inv *InvalidArgumentError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), secret) {
				t.Fatalf("err = %v, want *InvalidArgumentError containing %q and not the secret", err, tc.wantErr)
			}
		})
	}
	_, err := NewSpec("k", WithAllowlist(EgressRule{Host: "a.example", Methods: get, Credentials: []EgressCredential{ok}},
		EgressRule{Host: "b.example", Methods: get, Credentials: []EgressCredential{ok}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "two egress credentials") {
		t.Fatalf("err = %v, want one variable named twice refused", err)
	}
}

// TestEgressCredentialIdentity: a credential's variable is part of its rule's identity (a
// warm sandbox must hold the placeholder), its secret is not, and a secret never prints.
func TestEgressCredentialIdentity(t *testing.T) {
	r := EgressRule{Host: "a.example", Methods: []string{"GET"}, Credentials: []EgressCredential{{Header: "Authorization", Env: "T", Secret: "one"}}}
	if got := r.Canonical(); got != "a.example methods=GET paths= credentials=T" {
		t.Fatalf("canonical %q", got)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", r, r, r, r.Credentials[0].Secret); strings.Contains(s, "one") {
		t.Fatalf("the secret printed: %s", s)
	}
}

// TestEgressCredentialMethodLists: a credential's method list is its own or its rule's, and
// a rule may allow TRACE while its credential is bound to other methods.
func TestEgressCredentialMethodLists(t *testing.T) {
	c := EgressCredential{Header: "Authorization", Env: "T", Secret: "s3cret-value"}
	for _, r := range []EgressRule{
		{Host: "a.example", Methods: []string{"GET"}, Credentials: []EgressCredential{c}},
		{Host: "a.example", Paths: []string{"/**"}, Credentials: []EgressCredential{{Header: c.Header, Env: c.Env, Secret: c.Secret, Methods: []string{"GET"}}}},
		{Host: "a.example", Methods: []string{"GET", "TRACE"}, Credentials: []EgressCredential{{Header: c.Header, Env: c.Env, Secret: c.Secret, Methods: []string{"GET"}}}},
	} {
		if _, err := NewSpec("k", WithAllowlist(r)); err != nil {
			t.Errorf("%+v refused: %v", r, err)
		}
	}
}
