package egress

import (
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// TestServeEgressPrivateCIDRs: an allowlisted sandbox of "engine serve" reaches an internal
// host on a private network only when --egress-private-cidrs names that network's subnet;
// without the flag, or with another block, the proxy refuses the private address. The flag's
// value also reaches the proxy as its recorded allowance.
func TestServeEgressPrivateCIDRs(t *testing.T) {
	fx := newEgressFixture(t)
	subnet := strings.TrimSpace(dockertest.Docker(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", fx.network))
	cleanup := egressBackend(t, fx.network) // only to dispose whatever the test leaves
	fetch := func(t *testing.T, args ...string) string {
		t.Helper()
		url := itest.StartServe(t, nil, append([]string{"--egress-proxy-image", images.ProxyTag, "--egress-outbound-network", fx.network}, args...)...)
		_, c := itest.ServeClient(t, url)
		sb := itest.AcquireRemote(t, c, cleanup, itest.NewKey(t), allowlistSpec(t, images.ClientTag, allowedHost))
		res, err := sb.Exec(itest.Context(t), sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", time.Minute)
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		return strings.TrimSpace(res.Stdout())
	}
	t.Run("the flag names the subnet", func(t *testing.T) {
		if out := fetch(t, "--egress-private-cidrs", "10.99.0.0/24, "+subnet); out != "code=200" {
			t.Fatalf("the allowed internal host with its subnet allowed: %s, want code=200", out)
		}
	})
	t.Run("no flag", func(t *testing.T) {
		if out := fetch(t); out == "code=200" {
			t.Fatalf("the allowed internal host with no private allowance: %s, want a refusal", out)
		}
	})
	t.Run("another block", func(t *testing.T) {
		if out := fetch(t, "--egress-private-cidrs", "10.99.0.0/24"); out == "code=200" {
			t.Fatalf("the allowed internal host outside the allowance: %s, want a refusal", out)
		}
	})
}
