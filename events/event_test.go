package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

func TestToken(t *testing.T) {
	cases := []struct{ in, want string }{
		{"tenant-1", "tenant-1"},
		{"A_b-9", "A_b-9"},
		{strings.Repeat("x", 63), strings.Repeat("x", 63)},
		{strings.Repeat("x", 64), "h_"},
		{"h_abc", "h_"},
		{"-lead", "h_"},
		{"_lead", "h_"},
		{"", "h_"},
		{"a.b", "h_"},
		{"a b", "h_"},
		{"a*", "h_"},
		{"ü", "h_"},
	}
	for _, tc := range cases {
		got := Token(tc.in)
		if tc.want == "h_" {
			if len(got) != 34 || !strings.HasPrefix(got, "h_") || Token(tc.in) != got {
				t.Errorf("Token(%q) = %q, want h_ and 32 hex", tc.in, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("Token(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Known digest: sha256("") starts e3b0c44298fc1c149afbf4c8996fb924.
	if got := Token(""); got != "h_e3b0c44298fc1c149afbf4c8996fb924" {
		t.Errorf("Token(\"\") = %q", got)
	}
}

func TestWindowEvent(t *testing.T) {
	pub := time.Date(2026, 5, 1, 12, 5, 1, 0, time.UTC)
	w := testWindow()
	// Requests an inspecting rule decided carry a request object; tunnels keep their shape.
	w.Decisions = append(w.Decisions,
		sandbox.EgressDecision{Decision: sandbox.DecisionAllow, Host: "api.example", Port: 443, Method: "GET", Path: "/v1/x",
			Status: 200, BytesOut: 81, BytesIn: 4096, Rule: "api.example"},
		sandbox.EgressDecision{Decision: sandbox.DecisionWouldDeny, Host: "api.example", Port: 443, Method: "DELETE", Path: "/v1/x",
			Status: 204, BytesOut: 84, BytesIn: 60, Rule: "api.example"},
		// A connection refused at the workload's handshake says why; other DENYs say nothing.
		sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "api.example", Port: 443, TLS: "alert-unknown-ca"})
	ev, err := EgressEvent(w, "ENGINE:ID", pub)
	if err != nil {
		t.Fatal(err)
	}
	m, err := EgressMessage(DefaultSubjectPrefix, ev)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "maf.sandbox.docker.egress.observed.tenant-1.codeact" || m.ID != "egw_"+testProxyID || m.Type != TypeEgressObserved {
		t.Fatalf("message %+v", m)
	}
	var got map[string]any
	if err := json.Unmarshal(m.Data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"schema": "maf.sandbox.egress.observed/v2", "event_id": "egw_" + testProxyID, "backend": "docker", "engine_id": "ENGINE:ID",
		"key":         map[string]any{"scope": "tenant-1", "thread_id": "t-1", "agent_id": "devops"},
		"attribution": "label", "kind": "codeact",
		"proxy":         map[string]any{"container_id": testProxyID, "name": "maf-sandbox-docker-0123456789ab-proxy"},
		"private_cidrs": []any{"10.213.0.0/24", "10.9.0.0/16"},
		"window":        map[string]any{"start": "2026-05-01T12:00:00Z", "end": "2026-05-01T12:05:00Z", "closed": true},
		"decisions": []any{
			map[string]any{"verdict": "ALLOW", "host": "allowed.example", "port": 443.0, "at": "2026-05-01T12:00:01.000000005Z"},
			map[string]any{"verdict": "DENY", "host": "evil.example", "port": 443.0},
			map[string]any{"verdict": "DENY-NONGLOBAL", "host": "10.0.0.1", "port": 443.0},
			map[string]any{"verdict": "ALLOW", "host": "api.example", "port": 443.0, "request": map[string]any{
				"method": "GET", "path": "/v1/x", "status": 200.0, "bytes_out": 81.0, "bytes_in": 4096.0, "rule": "api.example"}},
			map[string]any{"verdict": "WOULD-DENY", "host": "api.example", "port": 443.0, "request": map[string]any{
				"method": "DELETE", "path": "/v1/x", "status": 204.0, "bytes_out": 84.0, "bytes_in": 60.0, "rule": "api.example"}},
			map[string]any{"verdict": "DENY", "host": "api.example", "port": 443.0, "tls": "alert-unknown-ca"},
		},
		"counts":    map[string]any{"allow": 2.0, "deny": 2.0, "deny_non_global": 1.0, "unreachable": 0.0, "would_deny": 1.0},
		"truncated": false, "unreadable": nil, "trigger": "dispose", "removal": "removed", "drain_seconds": 0.41,
		"published_at": "2026-05-01T12:05:01Z",
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("event\n got %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestWindowEventRefusals(t *testing.T) {
	cases := []struct {
		name string
		edit func(*sandbox.EgressWindow)
	}{
		{"short proxy ID", func(w *sandbox.EgressWindow) { w.ProxyID = "3f9c" }},
		{"unattributed", func(w *sandbox.EgressWindow) { w.Attribution = string(egresslog.AttributionNone) }},
		{"refused attribution", func(w *sandbox.EgressWindow) { w.Attribution = string(egresslog.AttributionRefused) }},
		{"removal failed", func(w *sandbox.EgressWindow) { w.Removal = "refused" }},
		{"empty window", func(w *sandbox.EgressWindow) { w.Decisions = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := testWindow()
			tc.edit(&w)
			if _, err := EgressEvent(w, "e", time.Now()); !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("err %v, want ErrInvalidEvent", err)
			}
		})
	}
	// Unreadable alone is worth an event, with window.closed false when the stop failed.
	w := testWindow()
	w.Decisions, w.Unreadable, w.Closed, w.Start = nil, "the proxy could not be stopped", false, time.Time{}
	ev, err := EgressEvent(w, "e", time.Now())
	if err != nil || ev.Unreadable == nil || ev.Window.Closed || ev.Window.Start != nil || len(ev.Decisions) != 0 || ev.Decisions == nil {
		t.Fatalf("unreadable window: %+v %v", ev, err)
	}
	if _, err := EgressMessage("bad prefix", ev); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("bad prefix: %v", err)
	}
}

func TestReapEvent(t *testing.T) {
	const run = "01HZX7RUN0000"
	s := sandbox.ReapResult{OlderThan: 24 * time.Hour, Scope: "tenant-1",
		Cutoff: time.Date(2026, 4, 30, 12, 0, 0, 0, time.UTC), StartedAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		FinishedAt: time.Date(2026, 5, 1, 12, 0, 3, 0, time.UTC), Disposed: 1, ProxiesRemoved: 1, NetworksRemoved: 1,
		Failures: []sandbox.ReapFailure{{Code: sandbox.DisposalRefused, Detail: "x: boom", ResourceID: "abc", ResourceKind: sandbox.ReapNetwork}}}
	ev, err := ReapEvent(s, run, "E", s.FinishedAt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReapMessage("ops.prefix", ev)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "ops.prefix.reap.completed" || m.ID != "reap_01HZX7RUN0000" || m.Type != TypeReapCompleted {
		t.Fatalf("message %+v", m)
	}
	if !strings.Contains(string(m.Data), `"schema":"maf.sandbox.reap.completed/v2"`) || !strings.Contains(string(m.Data), `"scope":"tenant-1"`) ||
		!strings.Contains(string(m.Data), `"older_than_ms":86400000`) || !strings.Contains(string(m.Data), `"resource_kind":"network"`) ||
		strings.Contains(string(m.Data), `"resources"`) {
		t.Fatalf("payload %s", m.Data)
	}
	s.Scope, s.Failures = "", nil
	ev, _ = ReapEvent(s, run, "E", s.FinishedAt)
	data, _ := json.Marshal(ev)
	if !strings.Contains(string(data), `"scope":null`) || !strings.Contains(string(data), `"failures":[]`) {
		t.Fatalf("payload %s", data)
	}
	for _, bad := range []struct {
		run string
		age time.Duration
		dry bool
	}{{"short", time.Hour, false}, {"long-enough-id", 0, false}, {"long-enough-id", time.Hour, true}} {
		if _, err := ReapEvent(sandbox.ReapResult{OlderThan: bad.age, DryRun: bad.dry}, bad.run, "E", time.Now()); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}

// Two drains of one proxy — by two engines, or an engine and the reaper, at different times,
// one finding it removed by itself and one finding it absent — must carry one event ID, or the stream's duplicate
// window could not drop the second: the ID is the proxy's identity and nothing of the drain.
func TestEventIDIsTheProxysAcrossDrains(t *testing.T) {
	first := testWindow()
	first.Removal, first.Trigger, first.DrainSeconds = sandbox.RemovalRemoved, string(egresslog.TriggerDispose), 0.2
	second := testWindow()
	second.Removal, second.Trigger, second.DrainSeconds = sandbox.RemovalAbsent, string(egresslog.TriggerReap), 3.5
	second.End = first.End.Add(time.Hour)
	a, err := EgressEvent(first, "engine-a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := EgressEvent(second, "engine-b", time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ma, _ := EgressMessage("p", a)
	mb, _ := EgressMessage("p", b)
	if a.EventID != b.EventID || ma.ID != mb.ID || ma.Subject != mb.Subject || ma.ID != "egw_"+first.ProxyID {
		t.Fatalf("two drains of one proxy: IDs %q and %q, subjects %q and %q", ma.ID, mb.ID, ma.Subject, mb.Subject)
	}
	other := testWindow()
	other.ProxyID = strings.Repeat("e", 64)
	c, _ := EgressEvent(other, "engine-a", time.Now())
	if c.EventID == a.EventID {
		t.Fatal("two proxies share an event ID")
	}
}
