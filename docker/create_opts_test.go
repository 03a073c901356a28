package docker

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/label"
)

func TestCLICreateArgs(t *testing.T) {
	got := strings.Join(cliCreateArgs(NewCreateSpec("N", "img", DefaultConfig().WorkloadOpts()...)), " ")
	if want := "create --name N --security-opt no-new-privileges --pids-limit 512 --cap-drop ALL --network none --pull never img sleep infinity"; got != want {
		t.Fatalf("create argv:\n got %s\nwant %s", got, want)
	}
}

func TestCLIRunArgs(t *testing.T) {
	labels := []label.Label{{Key: label.Scope, Value: "s"}, {Key: label.WorkDir, Value: "/maf-sandbox/work"}}
	cases := []struct {
		name string
		spec CreateSpec
		want string
	}{
		{"closed defaults: no capabilities", NewCreateSpec("N", "img", DefaultConfig().WorkloadOpts()...),
			"run -d --name N --security-opt no-new-privileges --pids-limit 512 --cap-drop ALL --network none --pull never img sleep infinity"},
		{"capabilities given back after the drop", NewCreateSpec("N", "img", Config{CapAdd: []string{"kill", "CAP_CHOWN"}}.WorkloadOpts()...),
			"run -d --name N --security-opt no-new-privileges --pids-limit 512 --cap-drop ALL --cap-add KILL --cap-add CHOWN" +
				" --network none --pull never img sleep infinity"},
		{"a spec's limits within the configuration's", NewCreateSpec("N", "img",
			append(Config{Memory: "1g"}.WorkloadOpts(), WithLimits(256<<20, 0.5, 64))...),
			"run -d --name N --security-opt no-new-privileges --pids-limit 64 --cap-drop ALL --memory 268435456 --cpus 0.5" +
				" --network none --pull never img sleep infinity"},
		{"zero limits keep the configuration's", NewCreateSpec("N", "img", append(Config{Memory: "1g"}.WorkloadOpts(), WithLimits(0, 0, 0))...),
			"run -d --name N --security-opt no-new-privileges --pids-limit 512 --cap-drop ALL --memory 1g --network none --pull never img sleep infinity"},
		{"every opt-in, options in any order",
			NewCreateSpec("N", "img", WithLabels(labels...), withCPUs(2), withMemory("512m"), withCapDropAll(),
				withPidsLimit(64), withNoNewPrivileges()),
			"run -d --name N --security-opt no-new-privileges --pids-limit 64 --cap-drop ALL --memory 512m --cpus 2.0" +
				" --network none --label maf-sandbox.scope=s --label maf-sandbox.work-dir.v1=/maf-sandbox/work --pull never img sleep infinity"},
		{"allowlist network",
			NewCreateSpec("N", "img", withNoNewPrivileges(), withPidsLimit(512), WithNetwork("N-net", ProxyURL("N"))),
			"run -d --name N --security-opt no-new-privileges --pids-limit 512 --network N-net" +
				" -e HTTPS_PROXY=http://N-proxy:3128 -e HTTP_PROXY=http://N-proxy:3128" +
				" -e https_proxy=http://N-proxy:3128 -e http_proxy=http://N-proxy:3128" +
				" --cap-drop NET_RAW --sysctl net.ipv6.conf.all.disable_ipv6=1 --sysctl net.ipv6.conf.default.disable_ipv6=1" +
				" --pull never img sleep infinity"},
		{"gated allowlist workload: a fixed address and the gate as entrypoint",
			NewCreateSpec("N", "img", WithNetwork("N-net", "u"), WithIPv4(netip.MustParseAddr("10.213.0.6")),
				WithEntrypoint("/gate"), WithCmd("/gate.t", "ep", "sleep", "infinity")),
			"run -d --name N --network N-net --ip 10.213.0.6 -e HTTPS_PROXY=u -e HTTP_PROXY=u -e https_proxy=u -e http_proxy=u" +
				" --cap-drop NET_RAW --sysctl net.ipv6.conf.all.disable_ipv6=1 --sysctl net.ipv6.conf.default.disable_ipv6=1" +
				" --entrypoint /gate --pull never img /gate.t ep sleep infinity"},
		{"network none after a network", NewCreateSpec("N", "img", WithNetwork("N-net", "u"), WithNetworkNone()),
			"run -d --name N --network none --pull never img sleep infinity"},
		{"labels keep their order", NewCreateSpec("N", "img", WithLabels(label.Label{Key: "b", Value: "1"}), WithLabels(label.Label{Key: "a", Value: "2"})),
			"run -d --name N --network none --label b=1 --label a=2 --pull never img sleep infinity"},
		{"command", NewCreateSpec("N", "img", WithCmd("sh", "-c", "x y")),
			"run -d --name N --network none --pull never img sh -c x y"},
		{"nil option skipped", NewCreateSpec("N", "img", nil), "run -d --name N --network none --pull never img sleep infinity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := cliRunArgs(tc.spec)
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("argv\n got %s\nwant %s", strings.Join(got, " "), tc.want)
			}
			for _, a := range got {
				switch a {
				case "-v", "--volume", "--mount", "--tmpfs", "-p", "--publish", "--privileged":
					t.Fatalf("argv carries %s", a)
				}
			}
		})
	}
}

func TestCLIRunArgsKeepsArgumentsWhole(t *testing.T) {
	// An argument with spaces stays one argument: argv never goes through a shell.
	got := cliRunArgs(NewCreateSpec("N", "img", WithLabels(label.Label{Key: "k", Value: "a b"}), WithCmd("echo", "x; rm -rf /")))
	want := []string{"run", "-d", "--name", "N", "--network", "none", "--label", "k=a b", "--pull", "never", "img", "echo", "x; rm -rf /"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestPyFloatRepr(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{1.5, "1.5"}, {2, "2.0"}, {0.1, "0.1"}, {1e-05, "1e-05"}, {1e16, "1e+16"},
		{123456789012345.6, "123456789012345.6"}, {0.0001, "0.0001"}, {0.5, "0.5"}, {1.0 / 3, "0.3333333333333333"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := pyFloatRepr(tc.in); got != tc.want {
				t.Fatalf("pyFloatRepr(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCreateSpecValidate(t *testing.T) {
	neg := -1.0
	cases := []struct {
		name    string
		spec    CreateSpec
		wantErr error
	}{
		{"ok", NewCreateSpec("N", "img"), nil},
		{"no name", NewCreateSpec("", "img"), ErrInvalid},
		{"no image", NewCreateSpec("N", ""), ErrInvalid},
		{"flag-shaped image", NewCreateSpec("N", "--privileged"), ErrInvalid},
		{"flag-shaped name", NewCreateSpec("-N", "img"), ErrInvalid},
		{"negative cpus", CreateSpec{Name: "N", Image: "img", CPUs: &neg}, ErrInvalid},
		{"network without proxy", NewCreateSpec("N", "img", WithNetwork("N-net", "")), ErrInvalid},
		{"label with equals in key", NewCreateSpec("N", "img", WithLabels(label.Label{Key: "a=b", Value: "c"})), ErrInvalid},
		{"trust file with a network", NewCreateSpec("N", "img", WithNetwork("N-net", "u"), WithTrustFile("/ca.pem")), nil},
		{"trust file without a network", NewCreateSpec("N", "img", WithTrustFile("/ca.pem")), ErrInvalid},
		{"relative trust file", NewCreateSpec("N", "img", WithNetwork("N-net", "u"), WithTrustFile("ca.pem")), ErrInvalid},
		{"an allowed capability given back", NewCreateSpec("N", "img", withCapDropAll(), withCapAdd("KILL")), nil},
		{"a capability outside the allow-list", NewCreateSpec("N", "img", withCapDropAll(), withCapAdd("SYS_ADMIN")), ErrInvalid},
		{"a capability added without the drop", NewCreateSpec("N", "img", withCapAdd("KILL")), ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.spec.validate(); !errors.Is(err, tc.wantErr) {
				t.Fatalf("validate() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// An inspecting allowlist's workload gets the four trust variables, after the proxy ones.
func TestCLIRunArgsTrustFile(t *testing.T) {
	got := strings.Join(cliRunArgs(NewCreateSpec("N", "img", WithNetwork("N-net", "u"), WithTrustFile("/ca.pem"))), " ")
	want := "-e http_proxy=u -e SSL_CERT_FILE=/ca.pem -e REQUESTS_CA_BUNDLE=/ca.pem -e NODE_EXTRA_CA_CERTS=/ca.pem -e CURL_CA_BUNDLE=/ca.pem"
	if !strings.Contains(got, want) {
		t.Fatalf("args %q do not hold %q", got, want)
	}
	if strings.Contains(strings.Join(cliRunArgs(NewCreateSpec("N", "img", WithNetwork("N-net", "u"))), " "), "SSL_CERT_FILE") {
		t.Fatal("a tunnel-only workload got the trust variables")
	}
}
