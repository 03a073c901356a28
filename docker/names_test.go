package docker

import (
	"regexp"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestContainerName(t *testing.T) {
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	cases := []struct {
		name     string
		key      sandbox.Key
		kind     string
		egressID string
		want     string
	}{
		// sha256("1:s1:t1:a1:k")
		{"vector", k, "k", "", "maf-sandbox-docker-afef7c40ec0c"},
		// sha256("3:a|b1:c1:a1:k")
		{"length prefix vector", sandbox.Key{Scope: "a|b", ThreadID: "c", AgentID: "a"}, "k", "", "maf-sandbox-docker-a8b631ad805f"},
		// Empty thread and agent are parts of zero length, as in the reference: sha256("1:s0:0:1:k").
		{"empty thread and agent", sandbox.Key{Scope: "s"}, "k", "", "maf-sandbox-docker-361e20b396b5"},
		// sha256("1:s0:1:a1:k")
		{"empty thread", sandbox.Key{Scope: "s", AgentID: "a"}, "k", "", "maf-sandbox-docker-8ff2c8158736"},
		// sha256("1:s1:t0:1:k")
		{"empty agent", sandbox.Key{Scope: "s", ThreadID: "t"}, "k", "", "maf-sandbox-docker-b1743901cd31"},
		// sha256("0:0:0:1:k")
		{"every key part empty", sandbox.Key{}, "k", "", "maf-sandbox-docker-100787f57c93"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContainerName(tc.key, tc.kind, tc.egressID); got != tc.want {
				t.Fatalf("ContainerName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestContainerNameIdentity(t *testing.T) {
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	shape := regexp.MustCompile(`^maf-sandbox-docker-[0-9a-f]{12}$`)
	distinct := []struct {
		name string
		a, b string
	}{
		{"delimiter cannot collide",
			ContainerName(sandbox.Key{Scope: "a|b", ThreadID: "c", AgentID: "x"}, "k", ""),
			ContainerName(sandbox.Key{Scope: "a", ThreadID: "b|c", AgentID: "x"}, "k", "")},
		{"kind is identity", ContainerName(k, "python", ""), ContainerName(k, "bicep", "")},
		{"egress is identity", ContainerName(k, "k", ""), ContainerName(k, "k", "allow:a.example")},
		{"call is identity", ContainerName(k, "k", ""),
			ContainerName(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a", CallID: "1"}, "k", "")},
	}
	for _, tc := range distinct {
		t.Run(tc.name, func(t *testing.T) {
			if tc.a == tc.b {
				t.Fatalf("both are %s", tc.a)
			}
			for _, n := range []string{tc.a, tc.b} {
				if !shape.MatchString(n) {
					t.Fatalf("%q does not have the name shape", n)
				}
			}
		})
	}
	t.Run("closed name unchanged by an empty proxy image", func(t *testing.T) {
		if ContainerName(k, "k", EgressID("", []string{"a.example"})) != ContainerName(k, "k", "") {
			t.Fatal("a closed sandbox's name changed")
		}
	})
}

func TestEgressID(t *testing.T) {
	cases := []struct {
		name      string
		image     string
		allowlist []string
		want      string
	}{
		{"no proxy image", "", []string{"a.example"}, ""},
		{"empty allowlist", "proxy:local", nil, ""},
		{"sorted by code point", "proxy:local", []string{"b.example", "B.example", "a.example"}, "allow:B.example,a.example,b.example"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := EgressID(tc.image, tc.allowlist); got != tc.want {
				t.Fatalf("EgressID = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseName(t *testing.T) {
	n := "maf-sandbox-docker-0123456789ab"
	cases := []struct {
		name     string
		in       string
		wantBase string
		wantRole NameRole
		wantOK   bool
	}{
		{"workload", n, n, RoleWorkload, true},
		{"engine's leading slash", "/" + n, n, RoleWorkload, true},
		{"proxy", ProxyName(n), n, RoleProxyName, true},
		{"network", NetworkName(n), n, RoleNetworkName, true},
		{"foreign prefix", "maf-sandbox-wsl-0123456789ab", "", 0, false},
		{"upper-case hex", "maf-sandbox-docker-0123456789AB", "", 0, false},
		{"too short", "maf-sandbox-docker-0123", "", 0, false},
		{"other suffix", n + "-x", "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, role, ok := ParseName(tc.in)
			if base != tc.wantBase || role != tc.wantRole || ok != tc.wantOK {
				t.Fatalf("ParseName(%q) = %q, %v, %v; want %q, %v, %v", tc.in, base, role, ok, tc.wantBase, tc.wantRole, tc.wantOK)
			}
		})
	}
	if got := ProxyURL(n); got != "http://"+n+"-proxy:3128" {
		t.Fatalf("ProxyURL = %q", got)
	}
}
