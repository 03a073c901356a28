package events

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Events observes every act: each becomes its audit event, with what the call under its
// context knew of it (request ID, trace, account, API engine, handle) and the act's own detail;
// a refusal carries its wire code, never its text.
func TestEventsObserveEveryAct(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc := connect(t, srv.ClientURL())
	ev, err := New(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(context.Background()) })
	key := sandbox.Key{Scope: "tenant-1", ThreadID: "t-1", AgentID: "devops"}
	act := sandbox.Act{Key: key, Kind: "codeact", Backend: "docker", InstanceID: "inst-1", Took: 1500 * time.Microsecond}
	refused := act
	refused.Err = &sandbox.NotConfinedError{Path: "../x", Reason: "it climbs out of 10.0.0.7's secret"}
	timedOut := act
	timedOut.Err = &sandbox.TimeoutError{Op: "exec"}
	ctx := sandbox.WithCall(context.Background(), sandbox.Call{RequestID: "req-1", Traceparent: "00-4b-a1-01", Account: "acct-a",
		Service: "svc-1", Handle: func(instance string) string { return "h-" + instance }})
	argv0, sum := sandbox.CommandDigest([]string{"sh", "-c", "echo hi"}, "", sandbox.FormArgv)

	ev.SandboxAcquired(ctx, sandbox.SandboxAcquired{Act: act, Outcome: sandbox.OutcomeRestarted, Image: "img", ImageID: "sha256:1", Egress: sandbox.EgressClosed})
	ev.ExecFinished(ctx, sandbox.ExecFinished{Act: act, Form: sandbox.FormArgv, Argv0: argv0, CommandSHA256: sum, ExitCode: 3, StdoutBytes: 3})
	ev.ExecFinished(ctx, sandbox.ExecFinished{Act: timedOut, Form: sandbox.FormShell, CommandSHA256: sum})
	ev.FileCrossed(ctx, sandbox.FileCrossed{Act: act, Direction: sandbox.DirectionIn, Path: "a.txt", Size: 5, SHA256: "abc"})
	ev.FileCrossed(ctx, sandbox.FileCrossed{Act: act, Direction: sandbox.DirectionOut, Path: "a.txt", Size: 5, SHA256: "abc"})
	ev.FileCrossed(ctx, sandbox.FileCrossed{Act: refused, Direction: sandbox.DirectionIn, Path: "../x"})
	ev.SandboxDisposed(ctx, sandbox.SandboxDisposed{Act: sandbox.Act{Key: key}, Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalTimeout}})
	ev.ScopeDisposed(ctx, sandbox.ScopeDisposed{Act: sandbox.Act{Key: sandbox.Key{Scope: "tenant-1", ThreadID: "t-1"}}, Purge: sandbox.ScopePurge{Disposed: 2}})
	ev.FingerprintTaken(ctx, sandbox.FingerprintTaken{Act: act, Phase: "final", Verdict: "clean"})
	ev.PlacementChanged(ctx, sandbox.PlacementChanged{Act: sandbox.Act{Key: key, Kind: "codeact"}, Change: sandbox.PlacementTakenOver, Detail: "from engine e2"})
	ev.EngineStateChanged(context.Background(), sandbox.EngineStateChanged{Act: sandbox.Act{Err: &messages.EngineUnavailableError{}}, State: sandbox.EngineDaemonUnreachable})
	ev.CallRefused(ctx, sandbox.CallRefused{Act: sandbox.Act{Key: key, Kind: "codeact", Err: &messages.ForbiddenError{Reason: "not yours"}}, Op: "exec"})
	const n = 12
	waitFor(t, "every act delivered", func() bool { st := ev.AuditStats(); return st.Pending == 0 && st.Delivered == n })

	got := map[string][]AuditEvent{}
	var order []string
	for _, m := range streamMessages(t, nc, StreamAudit) {
		var a AuditEvent
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatal(err)
		}
		if a.Schema != SchemaAudit || a.ID == "" || m.Headers().Get(HeaderMsgID) != a.ID || a.Backend != BackendDocker {
			t.Errorf("%s lacks its identity: %s", a.Type, m.Data())
		}
		got[a.Type] = append(got[a.Type], a)
		order = append(order, a.Type)
	}
	if len(order) != n {
		t.Fatalf("%d events %v, want %d", len(order), order, n)
	}
	call := func(a AuditEvent) bool {
		return a.RequestID == "req-1" && a.Traceparent == "00-4b-a1-01" && a.Account == "acct-a" && a.Service == "svc-1"
	}
	acq := got[AuditSandboxAcquired][0]
	if !call(acq) || acq.Sandbox != "h-inst-1" || acq.InstanceID != "inst-1" || acq.Kind != "codeact" || acq.Outcome != sandbox.OutcomeRestarted ||
		acq.Key == nil || *acq.Key != *messages.KeyToWire(key) || acq.DurationMS != 1.5 ||
		*acq.Acquire != (AuditAcquire{Image: "img", ImageID: "sha256:1", Egress: "closed"}) {
		t.Errorf("acquired: %+v %+v", acq, acq.Acquire)
	}
	if execs := got[AuditExecFinished]; len(execs) != 2 || execs[0].Outcome != sandbox.OutcomeOK || execs[0].Exec.ExitCode == nil ||
		*execs[0].Exec.ExitCode != 3 || execs[0].Exec.Argv0 != "sh" || execs[0].Exec.CommandSHA256 != sum || execs[0].Exec.StdoutBytes != 3 ||
		execs[1].Outcome != sandbox.OutcomeTimeout || execs[1].Error != messages.CodeTimeout || execs[1].Exec.ExitCode != nil {
		t.Errorf("execs: %+v", execs)
	}
	if w := got[AuditFileWritten]; len(w) != 1 || *w[0].File != (AuditFile{Direction: "in", Path: "a.txt", Size: 5, SHA256: "abc"}) {
		t.Errorf("written: %+v", w)
	}
	if r := got[AuditFileRead]; len(r) != 1 || r[0].File.Direction != "out" {
		t.Errorf("read: %+v", r)
	}
	if r := got[AuditFileRefused]; len(r) != 1 || r[0].Outcome != sandbox.OutcomeRefused || r[0].Error != messages.CodeNotConfined ||
		*r[0].File != (AuditFile{Direction: "in", Path: "../x"}) {
		t.Errorf("refused: %+v", r)
	}
	if d := got[AuditSandboxDisposed]; len(d) != 1 || d[0].Disposal.Undisposed != "timeout" || d[0].Sandbox != "" {
		t.Errorf("disposed: %+v", d)
	}
	if p := got[AuditScopePurged]; len(p) != 1 || p[0].Disposal.Disposed != 2 || p[0].Key.ThreadID != "t-1" {
		t.Errorf("purged: %+v", p)
	}
	if v := got[AuditFingerprint]; len(v) != 1 || *v[0].Verdict != (AuditVerdict{Phase: "final", Verdict: "clean"}) {
		t.Errorf("fingerprint: %+v", v)
	}
	if p := got[AuditPlacementChanged]; len(p) != 1 || *p[0].Placement != (AuditPlacement{Change: "taken_over", Detail: "from engine e2"}) {
		t.Errorf("placement: %+v", p)
	}
	if d := got[AuditDaemonAway]; len(d) != 1 || d[0].Outcome != sandbox.OutcomeOK || d[0].Error != messages.CodeEngineUnavailable || d[0].Key != nil {
		t.Errorf("daemon away: %+v", d)
	}
	c := got[AuditCallRefused]
	if len(c) != 1 || c[0].Key != nil || c[0].Kind != "" || c[0].Sandbox != "" || c[0].Error != messages.CodeForbidden ||
		c[0].Account != "acct-a" || c[0].Call == nil || c[0].Call.Op != "exec" {
		t.Errorf("call refused: %+v", c)
	}
	for _, typ := range order {
		for _, a := range got[typ] {
			if raw, _ := json.Marshal(a); strings.Contains(string(raw), "10.0.0.7") || strings.Contains(string(raw), "not yours") {
				t.Errorf("%s carries a refusal's text: %s", typ, raw)
			}
		}
	}
}

// A sweep that ran is a summary on the ops stream; a dry run is none. A host-tool call goes
// out on core NATS.
func TestEventsObserveSweepsAndToolCalls(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc := connect(t, srv.ClientURL())
	ev, err := New(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := nc.SubscribeSync(DefaultSubjectPrefix + ".host_tools.called.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res := sandbox.ReapResult{OlderThan: time.Hour, StartedAt: now, FinishedAt: now, Cutoff: now.Add(-time.Hour), Disposed: 1}
	dry := res
	dry.DryRun = true
	ev.ReapCompleted(t.Context(), sandbox.ReapCompleted{Result: dry})
	ev.ReapCompleted(t.Context(), sandbox.ReapCompleted{Result: res})
	ev.HostToolCalled(sandbox.WithCall(t.Context(), sandbox.Call{Service: "svc-1"}), sandbox.HostToolCalled{
		Act: sandbox.Act{Key: sandbox.Key{Scope: "s", ThreadID: "t"}, Kind: "codeact", Took: time.Second}, RunDir: "/w/r", Tool: "search", Call: 1, Bytes: 9})
	m, err := calls.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var tool HostToolCalledEvent
	if err := json.Unmarshal(m.Data, &tool); err != nil || tool.Schema != SchemaHostToolCalled || tool.Service != "svc-1" ||
		tool.RunDir != "/w/r" || tool.Tool != "search" || tool.Seconds != 1 || tool.Key.ThreadID != "t" {
		t.Fatalf("host-tool event %s (%v)", m.Data, err)
	}
	if err := ev.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	msgs := streamMessages(t, nc, StreamOps)
	if len(msgs) != 1 {
		t.Fatalf("the ops stream holds %d summaries, want 1 (the dry run's is none)", len(msgs))
	}
	var sum ReapCompletedEvent
	if err := json.Unmarshal(msgs[0].Data(), &sum); err != nil || sum.Disposed != 1 || sum.Schema != SchemaReapCompleted {
		t.Fatalf("summary %s (%v)", msgs[0].Data(), err)
	}
}
