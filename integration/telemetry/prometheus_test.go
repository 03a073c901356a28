package telemetry

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// TestPrometheusScrapesTheEngine runs engine serve with --metrics-listen (and placement, an
// egress proxy image, the archive file plane), has a real Prometheus server scrape it every
// second, runs a workload over NATS (one acquire, three execs, a refused read, a write; an
// allowlisted sandbox whose proxy refuses a host, then disposed) and asks Prometheus's HTTP
// API for what the engine recorded: the acquire counted as created, the exec latency
// histogram with four observations, the refused read under its code, the daemon's create
// calls, the live sandboxes by kind, the event outbox's counts after a reap published its
// summary, the write's freeze, the denial under the sandbox's scope, and the placement leases
// claimed and held.
func TestPrometheusScrapesTheEngine(t *testing.T) {
	dockertest.Require(t)
	prom := prometheusBinary(t)
	egressImages(t)
	metricsAddr := freeAddr(t)
	natsURL := itest.StartServe(t, []string{actors.FilePlaneEnv + "=" + string(actors.FilePlaneArchive)},
		"--metrics-listen", metricsAddr, "--placement", "--egress-proxy-image", images.ProxyTag)
	promURL := startPrometheus(t, prom, metricsAddr)

	ctx := itest.Context(t)
	c := remoteClient(t, natsURL)
	b := itest.NewBackend(t) // only to dispose whatever the test leaves
	key := itest.NewKey(t)
	sb := itest.AcquireRemote(t, c, b, key, itest.BusyboxSpec(t))
	for i := range 3 {
		if _, err := sb.Exec(ctx, sandbox.Shell(fmt.Sprintf("echo %d", i)), ".", time.Minute); err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
	}
	if _, err := sb.ReadFile(ctx, "../../etc/passwd", ".", 4096); err == nil {
		t.Fatal("a read outside the sandbox succeeded")
	}
	if err := sb.WriteFile(ctx, "note.txt", []byte("frozen for this"), "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	// An allowlisted sandbox of a scope of its own asks its proxy for a host it refuses; its
	// disposal drains the proxy's window, and the denial is counted under that scope.
	fetchKey := itest.NewKey(t)
	fetcher := itest.AcquireRemote(t, c, egressCleanup(t), fetchKey, fetcherSpec(t))
	fetchDenied(t, ctx, fetcher)
	if f := c.Dispose(ctx, fetchKey, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose the fetcher: %v", f)
	}
	// A reap of a scope nobody else uses publishes its summary event through the outbox.
	if _, err := c.Reap(ctx, time.Hour, key.Scope); err != nil {
		t.Fatalf("reap: %v", err)
	}

	for _, q := range []struct{ query, want string }{
		{`sum(maf_sandbox_acquires_total{maf_sandbox_kind="shell",maf_sandbox_outcome="created"})`, "1"},
		{`sum(rpc_server_call_duration_seconds_count{rpc_method="exec"})`, "4"},       // three echoes, one fetch
		{`count(rpc_server_call_duration_seconds_bucket{rpc_method="exec"}) > 1`, ""}, // the buckets exist
		{`sum(rpc_server_call_duration_seconds_count{rpc_method="read_file",error_type="not_confined"})`, "1"},
		{`sum(maf_sandbox_docker_call_duration_seconds_count{maf_sandbox_docker_operation="create"}) >= 1`, ""},
		{`sum(maf_sandbox_sandboxes{maf_sandbox_kind="shell"})`, "1"},
		{`sum(maf_sandbox_events_total{maf_sandbox_result="delivered"}) >= 1`, ""},
		{`sum(maf_sandbox_events_total{maf_sandbox_result="dropped"})`, "0"},
		{`sum(maf_sandbox_events_pending)`, "0"},
		{`sum(maf_sandbox_freeze_duration_seconds_count) >= 1`, ""},
		{fmt.Sprintf(`sum(maf_sandbox_egress_decisions_total{maf_sandbox_scope=%q,maf_sandbox_egress_decision="DENY"})`, fetchKey.Scope), "1"},
		{`sum(maf_sandbox_placement_lease_changes_total{maf_sandbox_placement_change="claimed"})`, "2"},
		{`sum(maf_sandbox_placement_leases)`, "1"}, // the shell sandbox's; the fetcher's went with it
	} {
		got := eventually(t, promURL, q.query, q.want)
		t.Logf("%s = %s", q.query, got)
	}
	// The alerting rules of docs/operations.md, with their thresholds at 0, fire on this
	// engine's first refusal and its first denial: a series that begins with them is caught by
	// their "unless ... offset" branch, where increase() sees no increase.
	for _, q := range []struct{ query, want string }{
		{confinementAlert(0), "1"},
		{egressDenialsAlert(0), "1"},
	} {
		got := eventually(t, promURL, q.query, q.want)
		t.Logf("%s = %s", q.query, got)
	}
	// The exec latency as Prometheus computes it from the histogram: a number of seconds.
	med := eventually(t, promURL, `histogram_quantile(0.5, sum by (le) (rpc_server_call_duration_seconds_bucket{rpc_method="exec"}))`, "")
	if v, err := strconv.ParseFloat(med, 64); err != nil || v <= 0 || v > 60 {
		t.Fatalf("median exec latency %q from the histogram", med)
	}
}

// confinementAlert is the expression of docs/operations.md's SandboxConfinementRefusals with
// its threshold at min.
func confinementAlert(min int) string {
	const refused = `rpc_server_call_duration_seconds_count{error_type="not_confined"}`
	return fmt.Sprintf("sum by (instance) (increase(%[1]s[5m])) > %[2]d\nor sum by (instance) (%[1]s unless %[1]s offset 5m) > %[2]d", refused, min)
}

// egressDenialsAlert is the expression of docs/operations.md's SandboxEgressDenials with its
// threshold at min.
func egressDenialsAlert(min int) string {
	const denied = `maf_sandbox_egress_decisions_total{maf_sandbox_egress_decision=~"DENY|DENY-NONGLOBAL"}`
	return fmt.Sprintf("sum by (maf_sandbox_scope) (increase(%[1]s[15m])) > %[2]d\nor sum by (maf_sandbox_scope) (%[1]s unless %[1]s offset 15m) > %[2]d", denied, min)
}

// prometheusBinary is Debian's prometheus; .ci/run installs it.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus on PATH: install Debian's prometheus package (apt-get install prometheus); .ci/run does")
	}
	return p
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// startPrometheus runs a Prometheus server that scrapes target every second, on a store in the
// test's temporary directory, and returns its base URL once it answers ready.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: engine\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	base := "http://" + listen
	startServer(t, "prometheus", bin, base+"/-/ready", "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen, "--log.level=warn")
	return base
}

// eventually asks Prometheus query until it returns one sample (whose value is want, when want
// is set) and returns the value; scrapes come every second, so a minute is ample.
func eventually(t *testing.T, base, query, want string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := ""
	for {
		v, err := instant(base, query)
		if err == nil && v != "" && (want == "" || v == want) {
			return v
		}
		last = fmt.Sprintf("%q, %v", v, err)
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus never answered %s with %q: last %s", query, want, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// instant runs an instant query and returns the value of its one sample ("" when none).
func instant(base, query string) (string, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", err
	}
	if r.Status != "success" {
		return "", fmt.Errorf("query %s: %s", query, r.Error)
	}
	switch len(r.Data.Result) {
	case 0:
		return "", nil
	case 1:
		s, _ := r.Data.Result[0].Value[1].(string)
		return s, nil
	default:
		return "", fmt.Errorf("query %s: %d samples", query, len(r.Data.Result))
	}
}
