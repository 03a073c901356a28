package docker

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mafsandbox/engine/label"
)

func TestNetworkArgs(t *testing.T) {
	cases := []struct {
		name string
		got  []string
		want []string
	}{
		{"network create carries both isolated options and --internal",
			cliNetworkCreateArgs(NetworkSpec{Name: "n-net", Labels: []label.Label{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}}),
			[]string{"network", "create", "--driver", "bridge", "--internal",
				"--opt", "com.docker.network.bridge.gateway_mode_ipv4=isolated",
				"--opt", "com.docker.network.bridge.gateway_mode_ipv6=isolated",
				"--label", "a=1", "--label", "b=2", "n-net"}},
		{"below 28: --internal with inhibit_ipv4 on an explicit subnet",
			cliNetworkCreateArgs(NetworkSpec{Name: "n-net", Topology: TopologyInhibitIPv4, Subnet: netip.MustParsePrefix("10.213.4.8/29")}),
			[]string{"network", "create", "--driver", "bridge", "--internal",
				"--opt", "com.docker.network.bridge.inhibit_ipv4=true", "--subnet", "10.213.4.8/29", "n-net"}},
		{"a sealed proxy carries the workload's constraints",
			cliProxyCreateArgs(ProxySpec{Name: "n-proxy", Image: "img:local", Network: "n-net", Sealed: true}),
			[]string{"create", "--name", "n-proxy", "--pull", "never", "--read-only", "--cap-drop", "ALL",
				"--security-opt", "no-new-privileges", "--pids-limit", "64", "--memory", "64m",
				"--user", "65532:65532", "--log-driver", "json-file", "--log-opt", "max-size=16m",
				"--log-opt", "max-file=2", "--network", "n-net", "--cap-drop", "NET_RAW",
				"--sysctl", "net.ipv6.conf.all.disable_ipv6=1", "--sysctl", "net.ipv6.conf.default.disable_ipv6=1", "img:local"}},
		{"a proxy with a fixed address (the workload gate dials it)",
			cliProxyCreateArgs(ProxySpec{Name: "n-proxy", Image: "img:local", Network: "n-net", IPv4: netip.MustParseAddr("10.213.4.10")}),
			[]string{"create", "--name", "n-proxy", "--pull", "never", "--read-only", "--cap-drop", "ALL",
				"--security-opt", "no-new-privileges", "--pids-limit", "64", "--memory", "64m",
				"--user", "65532:65532", "--log-driver", "json-file", "--log-opt", "max-size=16m",
				"--log-opt", "max-file=2", "--network", "n-net", "--ip", "10.213.4.10", "img:local"}},
		{"proxy create is hardened, never pulls and joins N-net only",
			cliProxyCreateArgs(ProxySpec{Name: "n-proxy", Image: "img:local", Network: "n-net",
				Env: []string{"MAF_SANDBOX_ALLOW=a.example,b.example"}, Labels: []label.Label{{Key: label.Role, Value: label.RoleProxy}}}),
			[]string{"create", "--name", "n-proxy", "--pull", "never", "--read-only", "--cap-drop", "ALL",
				"--security-opt", "no-new-privileges", "--pids-limit", "64", "--memory", "64m",
				"--user", "65532:65532", "--log-driver", "json-file", "--log-opt", "max-size=16m",
				"--log-opt", "max-file=2", "--network", "n-net", "-e", "MAF_SANDBOX_ALLOW=a.example,b.example",
				"--label", "maf-sandbox.role=proxy", "img:local"}},
		{"a proxy's secret variables name no value on the command line",
			cliProxyCreateArgs(ProxySpec{Name: "n-proxy", Image: "img:local", Network: "n-net",
				Env: []string{"A=1"}, SecretEnv: []string{"MAF_SANDBOX_CREDENTIALS=[{\"secret\":\"s\"}]"}}),
			[]string{"create", "--name", "n-proxy", "--pull", "never", "--read-only", "--cap-drop", "ALL",
				"--security-opt", "no-new-privileges", "--pids-limit", "64", "--memory", "64m",
				"--user", "65532:65532", "--log-driver", "json-file", "--log-opt", "max-size=16m",
				"--log-opt", "max-file=2", "--network", "n-net", "-e", "A=1", "-e", "MAF_SANDBOX_CREDENTIALS", "img:local"}},
		{"stop by ID with a short grace", cliProxyStopArgs("abc", 2*time.Second), []string{"stop", "--time", "2", "abc"}},
		{"logs by ID, tail and timestamps", cliProxyLogsArgs("abc", 10001), []string{"logs", "--tail", "10001", "--timestamps", "abc"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Fatalf("args\n got %q\nwant %q", tc.got, tc.want)
			}
		})
	}
}

// The 20.10 answer (captured on the development engine): both options accepted and echoed
// back, and the IPAM entry still carries a Gateway.
const inspect2010 = `{"Name":"egress-probe-net","Id":"07f97b5c1bd03b22fb5c249b3834c0315599df3e9bb7202db2b2a9bb12d0298c","Created":"2026-11-29T19:40:54.017818524Z","Scope":"local","Driver":"bridge","EnableIPv4":false,"EnableIPv6":false,"IPAM":{"Driver":"default","Options":{},"Config":[{"Subnet":"172.30.0.0/16","Gateway":"172.30.0.1"}]},"Internal":true,"Attachable":false,"Ingress":false,"ConfigFrom":{"Network":""},"ConfigOnly":false,"Containers":{"abc":{"Name":"n"}},"Options":{"com.docker.network.bridge.gateway_mode_ipv4":"isolated","com.docker.network.bridge.gateway_mode_ipv6":"isolated"},"Labels":{"maf-sandbox-test.probe":"1"}}`

func TestParseNetworkInspect(t *testing.T) {
	info, err := parseNetworkInspect("egress-probe-net", []byte(inspect2010))
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "bridge" || !info.Internal || len(info.IPAM) != 1 || info.IPAM[0].Gateway != "172.30.0.1" ||
		info.Options[OptGatewayModeIPv4] != GatewayIsolated || info.Containers["abc"] != "n" || info.Created.IsZero() {
		t.Fatalf("parsed %+v", info)
	}
	if _, err := parseNetworkInspect("x", []byte(`{}`)); err == nil {
		t.Fatal("an answer without an ID was accepted")
	}
}
