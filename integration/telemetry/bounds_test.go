package telemetry

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// TestPrometheusBoundsKindsAndReportsAFullAuditStream runs engine serve with
// --metrics-kinds shell and --metrics-label-cap 3 under a real Prometheus, and limits the
// engine's audit stream as an operator might: no more messages than it holds, new ones
// discarded. A caller then sends 13 acquires of an image the daemon lacks (refused), one of
// kind shell and 12 of kinds it made up.
//
// The kind label stays bounded: shell, the first three made-up kinds and "other" (nine
// acquires), every acquire counted. The 13 refusals' audit events are refused by the full
// stream: the engine holds them, and Prometheus (maf_sandbox_events_blocked,
// maf_sandbox_events_stream_refusals_total) and the health reply say so; once the limit is
// lifted they land and nothing is blocked.
func TestPrometheusBoundsKindsAndReportsAFullAuditStream(t *testing.T) {
	dockertest.Require(t)
	prom := prometheusBinary(t)
	metricsAddr := freeAddr(t)
	natsURL := itest.StartServe(t, nil, "--metrics-listen", metricsAddr, "--metrics-kinds", "shell", "--metrics-label-cap", "3")
	promURL := startPrometheus(t, prom, metricsAddr)
	nc, c := itest.ServeClient(t, natsURL)
	ctx := itest.Context(t)

	held := limitAuditStream(t, nc, 0)
	const absent = "maf-sandbox-test/absent:none"
	kinds := []string{"shell"}
	for i := range 12 {
		kinds = append(kinds, fmt.Sprintf("made-up-%02d", i))
	}
	for _, kind := range kinds {
		spec, err := sandbox.NewSpec(kind, sandbox.WithImage(absent))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, itest.NewKey(t), spec); err == nil {
			t.Fatalf("an acquire of %s succeeded", absent)
		}
	}

	for _, q := range []struct{ query, want string }{
		{`count(count by (maf_sandbox_kind) (maf_sandbox_acquires_total))`, "5"},
		{`sum(maf_sandbox_acquires_total{maf_sandbox_kind="shell"})`, "1"},
		{fmt.Sprintf(`sum(maf_sandbox_acquires_total{maf_sandbox_kind=%q})`, telemetry.LabelOther), "9"},
		{`sum(maf_sandbox_acquires_total)`, "13"},
		{`sum(maf_sandbox_events_blocked)`, "13"},
		{`sum(maf_sandbox_events_stream_refusals_total) > 0`, ""},
	} {
		got := eventually(t, promURL, q.query, q.want)
		t.Logf("%s = %s", q.query, got)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Events == nil || h.Events.Blocked != 13 || h.Events.Pending != 13 || h.Events.StreamRefusals == 0 || h.Events.Dropped != 0 {
		t.Fatalf("health with the audit stream full: %+v (events %+v), %v; want 13 held, all blocked", h, h.Events, err)
	}

	limitAuditStream(t, nc, -1)
	got := eventually(t, promURL, `sum(maf_sandbox_events_blocked)`, "0")
	t.Logf("after the limit was lifted: blocked = %s", got)
	if h, err := c.Health(ctx); err != nil || h.Events.Blocked != 0 {
		t.Fatalf("health once the stream takes events: %+v, %v", h.Events, err)
	}
	waitStream(t, nc, held+13)
}

// limitAuditStream sets the audit stream's message limit, discarding new messages: to what it
// holds now when maxMsgs is 0, none when -1. It returns what the stream holds.
func limitAuditStream(t *testing.T, nc *nats.Conn, maxMsgs int64) uint64 {
	t.Helper()
	ctx := itest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, events.StreamAudit)
	if err != nil {
		t.Fatalf("the audit stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxMsgs, cfg.Discard = maxMsgs, jetstream.DiscardNew
	if maxMsgs == 0 {
		cfg.MaxMsgs = max(int64(info.State.Msgs), 1)
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("limit the audit stream to %d: %v", cfg.MaxMsgs, err)
	}
	return info.State.Msgs
}

// waitStream waits until the audit stream holds n messages.
func waitStream(t *testing.T, nc *nats.Conn, n uint64) {
	t.Helper()
	ctx := itest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 600 {
		st, err := js.Stream(ctx, events.StreamAudit)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if last = info.State.Msgs; last == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the audit stream holds %d events, want %d", last, n)
}
