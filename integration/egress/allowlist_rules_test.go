package egress

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// TestAllowlistRulesOverNATS: an acquire sent as raw JSON (as a host in any language sends
// it) to an engine that serves allowlists is refused, typed, for every entry the rule grammar
// refuses, and leaves no container or network behind; an inspecting rule naming a method the
// Docker backend does not declare is refused as unsupported, never served as a plain tunnel; and today's
// shortest form, a bare host string, still acquires a sandbox that reaches its host.
func TestAllowlistRulesOverNATS(t *testing.T) {
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network)
	srv := natstest.Run(t)
	itest.ServeBackend(t, srv, b)
	nc := natstest.Connect(t, srv) // a caller's own: a request on the service's connection would outlive its drain

	invalid := func(err error) bool { var e *sandbox.InvalidArgumentError; return errors.As(err, &e) }
	unsupported := func(err error) bool { var e *sandbox.CapabilityNotSupportedError; return errors.As(err, &e) }
	refused := []struct {
		name  string
		allow string           // the egress_allow JSON
		typed func(error) bool // errors.As finds the typed error
		code  string
		says  string
	}{
		{"bare star", `["*"]`, invalid, messages.CodeInvalidArgument, "bare '*'"},
		{"ipv4 literal", `[{"host":"169.254.169.254"}]`, invalid, messages.CodeInvalidArgument, "IPv4 literal"},
		{"ipv6 literal", `["[::1]"]`, invalid, messages.CodeInvalidArgument, "IPv6 literal"},
		{"name over 253 octets", `["` + strings.Repeat("a", 250) + `.com"]`, invalid, messages.CodeInvalidArgument, "253 octets"},
		{"method not a token", `[{"host":"` + allowedHost + `","methods":["GET POST"]}]`, invalid, messages.CodeInvalidArgument, "HTTP tokens"},
		{"dot-dot path", `[{"host":"` + allowedHost + `","methods":["GET"],"paths":["/a/../admin"]}]`, invalid, messages.CodeInvalidArgument, "'..'"},
		{"encoded path", `[{"host":"` + allowedHost + `","paths":["/a%2Eb"]}]`, invalid, messages.CodeInvalidArgument, "percent-encoding"},
		{"encoded slash beside dot-dot", `[{"host":"` + allowedHost + `","paths":["/a/..%2Fb"]}]`, invalid, messages.CodeInvalidArgument, "encoded slash"},
		{"method not declared", `[{"host":"` + allowedHost + `","methods":["TRACE"],"paths":["/ok/**"]}]`,
			unsupported, messages.CodeCapabilityNotSupported, "egress_methods"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			key := itest.NewKey(t)
			reply, apiErr := rawAcquire(t, nc, key, tc.allow)
			if apiErr == nil {
				t.Cleanup(func() { b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}) })
				t.Fatalf("acquire with %s was served: %s", tc.allow, reply)
			}
			err := messages.DecodeError(apiErr)
			if apiErr.Code != tc.code || !tc.typed(err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("acquire with %s: %s %q (%T), want %s saying %q", tc.allow, apiErr.Code, err, err, tc.code, tc.says)
			}
			if left := scopeLeftovers(t, key); left != "" {
				t.Fatalf("the refused acquire left %s behind", left)
			}
		})
	}

	t.Run("a bare host string is today's tunnel", func(t *testing.T) {
		key := itest.NewKey(t)
		t.Cleanup(func() {
			if f := b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}); f != nil {
				t.Errorf("dispose: %v", f)
			}
		})
		reply, apiErr := rawAcquire(t, nc, key, `["`+allowedHost+`"]`)
		if apiErr != nil {
			t.Fatalf("acquire: %+v", apiErr)
		}
		var acq messages.APIAcquireResponse
		if err := json.Unmarshal(reply, &acq); err != nil || acq.Sandbox == nil {
			t.Fatalf("acquire reply %s: %v", reply, err)
		}
		sb, err := b.Acquire(itest.Context(t), key, allowlistSpec(t, images.ClientTag, allowedHost)) // the same warm sandbox
		if err != nil {
			t.Fatalf("the object form did not find the sandbox the string form made: %v", err)
		}
		res, err := sb.Exec(itest.Context(t), sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", time.Minute)
		if err != nil || strings.TrimSpace(res.Stdout()) != "code=200" {
			t.Fatalf("get through the tunnel: %v %q", err, res.Stdout())
		}
	})
}

// rawAcquire sends an acquire of the client image whose spec's egress_allow is the raw JSON
// allow, and returns the reply and its error.
func rawAcquire(t *testing.T, nc *nats.Conn, key sandbox.Key, allow string) ([]byte, *messages.APIError) {
	t.Helper()
	body := `{"type":` + quote(t, messages.APIAcquireRequestType) + `,"key":` + marshal(t, messages.KeyToWire(key)) +
		`,"spec":{"kind":"shell","image":` + quote(t, images.ClientTag) + `,"egress":"allowlist","egress_allow":` + allow + `}}`
	msg, err := nc.Request(messages.SubjectAcquire, []byte(body), 2*time.Minute)
	if err != nil {
		t.Fatalf("request acquire: %v", err)
	}
	var resp messages.APIResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatalf("reply %s: %v", msg.Data, err)
	}
	return msg.Data, resp.Error
}

func quote(t *testing.T, s string) string { return marshal(t, s) }

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scopeLeftovers lists the containers and networks labelled with key's scope.
func scopeLeftovers(t *testing.T, key sandbox.Key) string {
	t.Helper()
	filter := "label=" + label.Scope + "=" + label.Value(key.Scope)
	ctrs := dockertest.Docker(t, "ps", "-a", "--filter", filter, "--format", "{{.Names}}")
	nets := dockertest.Docker(t, "network", "ls", "--filter", filter, "--format", "{{.Name}}")
	return strings.TrimSpace(ctrs + " " + nets)
}
