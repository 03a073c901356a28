package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readEvents reads server-sent events from body and sends "kind data" lines to out until the
// body ends.
func readEvents(body *bufio.Scanner, out chan<- string) {
	kind := ""
	for body.Scan() {
		line := body.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			out <- kind + " " + strings.TrimPrefix(line, "data: ")
		}
	}
	close(out)
}

// TestHundredTabsSubscribeOnce: a hundred browsers on one console add no NATS subscription
// (the console's three event subscriptions serve them all), and one audit event reaches every
// one of them, after its snapshot, as a sandbox row.
func TestHundredTabsSubscribeOnce(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	c, err := New(nc, WithPoll(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(c.Handler())
	defer web.Close()
	defer func() { _ = c.Close() }() // before web.Close: it ends the streams
	before := nc.NumSubscriptions()
	const tabs = 100
	streams := make([]chan string, tabs)
	var wg sync.WaitGroup
	for i := range tabs {
		resp, err := http.Get(web.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		streams[i] = make(chan string, 16)
		wg.Add(1)
		go func() { defer wg.Done(); readEvents(bufio.NewScanner(resp.Body), streams[i]) }()
		if first := <-streams[i]; !strings.HasPrefix(first, "snapshot ") {
			t.Fatalf("tab %d began with %q, want its snapshot", i, first)
		}
	}
	// Three event subscriptions, the client's one reply subscription for requests, and at
	// most one poll's $SRV.STATS inbox, whatever the number of tabs.
	if got := nc.NumSubscriptions(); got > 5 {
		t.Fatalf("%d subscriptions with %d tabs (%d with none)", got, tabs, before)
	}
	ev := events.AuditEvent{Schema: events.SchemaAudit, ID: "aud_1", Type: events.AuditSandboxAcquired, Time: time.Now().UTC(),
		Service: "engine1", Key: &messages.APIKey{Scope: "s", ThreadID: "t", AgentID: "a"}, Kind: "shell", Sandbox: "h1",
		InstanceID: "i1", Outcome: "created", Acquire: &events.AuditAcquire{Image: "img", Egress: "closed"}}
	b, _ := json.Marshal(ev)
	if err := natstest.Connect(t, srv).Publish(events.AuditSubject(events.DefaultSubjectPrefix, "s", "shell", ev.Type), b); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		seen := map[string]bool{}
		for !seen["sandbox"] || !seen["audit"] {
			select {
			case line := <-s:
				kind, data, _ := strings.Cut(line, " ")
				seen[kind] = true
				if kind == "sandbox" {
					var e messages.APISandboxEntry
					if err := json.Unmarshal([]byte(data), &e); err != nil || e.InstanceID != "i1" || e.Engine != "engine1" || e.Image != "img" {
						t.Fatalf("tab %d got sandbox %s (%v)", i, data, err)
					}
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("tab %d saw %v of the audit event", i, seen)
			}
		}
	}
	_ = c.Close()
	wg.Wait()
}

// TestStateFollowsTheAudit applies audit events to the sandboxes as the page shows them: an
// acquire adds, a call moves the last call, a reset changes the instance, a refused dispose
// (the console's own probe) changes nothing, a dispose of the exact instance removes only it,
// a purge removes the conversation, an engine's stop removes its sandboxes.
func TestStateFollowsTheAudit(t *testing.T) {
	s := newState(10)
	t0 := time.Now()
	key := func(agent string) *messages.APIKey {
		return &messages.APIKey{Scope: "s", ThreadID: "t", AgentID: agent}
	}
	apply := func(ev events.AuditEvent) { s.auditEvent(json.RawMessage(`{}`), &ev) }
	ids := func() []string {
		var out []string
		for _, e := range s.sandboxList() {
			out = append(out, e.Engine+"/"+e.InstanceID)
		}
		return out
	}
	apply(events.AuditEvent{Type: events.AuditSandboxAcquired, Time: t0, Service: "e1", Key: key("a"), Kind: "shell", Sandbox: "h1", InstanceID: "i1", Outcome: "created"})
	apply(events.AuditEvent{Type: events.AuditSandboxAcquired, Time: t0.Add(time.Second), Service: "e1", Key: key("b"), Kind: "shell", Sandbox: "h2", InstanceID: "i2", Outcome: "created"})
	apply(events.AuditEvent{Type: events.AuditSandboxAcquired, Time: t0.Add(2 * time.Second), Service: "e2", Key: &messages.APIKey{Scope: "x"}, Kind: "shell", Sandbox: "h3", InstanceID: "i3", Outcome: "created"})
	apply(events.AuditEvent{Type: events.AuditSandboxAcquired, Time: t0, Service: "e1", Key: key("c"), Kind: "shell", Outcome: sandbox.OutcomeRefused})
	if got := strings.Join(ids(), ","); got != "e1/i1,e1/i2,e2/i3" {
		t.Fatalf("after the acquires: %s", got)
	}
	apply(events.AuditEvent{Type: events.AuditExecFinished, Time: t0.Add(time.Minute), Service: "e1", Key: key("a"), Sandbox: "h1", Outcome: "ok"})
	apply(events.AuditEvent{Type: events.AuditSandboxReset, Time: t0.Add(time.Minute), Service: "e1", Key: key("b"), Sandbox: "h2", InstanceID: "i2b", Outcome: "ok"})
	if e := s.sandboxes[sandboxRef{"e1", "h1"}]; !e.LastCallAt.Equal(t0.Add(time.Minute)) || !e.AcquiredAt.Equal(t0) {
		t.Fatalf("after an exec: %+v", e)
	}
	apply(events.AuditEvent{Type: events.AuditSandboxDisposed, Time: t0, Outcome: sandbox.OutcomeRefused, Error: "bad_request"})
	apply(events.AuditEvent{Type: events.AuditSandboxDisposed, Time: t0, Service: "e1", Key: key("a"), Kind: "shell", InstanceID: "other", Outcome: "ok"})
	if got := strings.Join(ids(), ","); got != "e1/i1,e1/i2b,e2/i3" {
		t.Fatalf("after a probe and a dispose of another instance: %s", got)
	}
	apply(events.AuditEvent{Type: events.AuditSandboxDisposed, Time: t0, Service: "e1", Key: key("a"), Kind: "shell", InstanceID: "i1", Outcome: "ok"})
	if got := strings.Join(ids(), ","); got != "e1/i2b,e2/i3" {
		t.Fatalf("after the exact dispose: %s", got)
	}
	apply(events.AuditEvent{Type: events.AuditScopePurged, Time: t0, Service: "e1", Key: &messages.APIKey{Scope: "s", ThreadID: "t"}, Outcome: "ok"})
	apply(events.AuditEvent{Type: events.AuditEngineStopped, Time: t0, Service: "e2", Outcome: "ok"})
	if got := ids(); len(got) != 0 {
		t.Fatalf("after the purge and the stop: %v", got)
	}
}

// TestWindowIsBounded: each kind of event keeps at most the window, the newest.
func TestWindowIsBounded(t *testing.T) {
	s := newState(3)
	for i := range 10 {
		s.egressEvent(json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`))
	}
	got := s.egress.all()
	if len(got) != 3 || string(got[0]) != `{"n":7}` || string(got[2]) != `{"n":9}` {
		t.Fatalf("window: %s", got)
	}
}

// TestSlowTabIsCutOff: a watcher that reads nothing is cut off once its buffer is full, and
// the others still get every update.
func TestSlowTabIsCutOff(t *testing.T) {
	s := newState(10)
	_, slow := s.watch("me", nil)
	_, fast := s.watch("me", nil)
	for range watcherBuffer + 1 {
		s.reapEvent(json.RawMessage(`{}`))
		<-fast.ch
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("the slow watcher was not cut off")
	}
	if _, ok := s.hub.watchers[fast]; !ok {
		t.Fatal("the fast watcher was cut off")
	}
}

// TestActionsNeedThePage: an action without the page's header or from another origin is
// refused before any NATS call; a dispose that names no exact instance is a bad request.
func TestActionsNeedThePage(t *testing.T) {
	srv := natstest.Run(t)
	c, err := New(natstest.Connect(t, srv), WithPoll(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	h := c.Handler()
	body := `{"key":{"scope":"s"},"kind":"shell","instance_id":"i"}`
	cases := []struct {
		name    string
		headers map[string]string
		body    string
		want    int
	}{
		{"no header", map[string]string{"Content-Type": "application/json"}, body, http.StatusForbidden},
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Console-Action": "1"}, body, http.StatusForbidden},
		{"other origin", map[string]string{"Content-Type": "application/json", "X-Console-Action": "1", "Origin": "http://evil.example"}, body, http.StatusForbidden},
		{"no instance", map[string]string{"Content-Type": "application/json", "X-Console-Action": "1"}, `{"key":{"scope":"s"},"kind":"shell"}`, http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8422/api/dispose", strings.NewReader(tc.body))
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
		})
	}
	_, err = c.Dispose(context.Background(), DisposeRequest{Key: messages.APIKey{Scope: "s"}})
	var invalid *sandbox.InvalidArgumentError
	if !errors.As(err, &invalid) {
		t.Fatalf("dispose without an instance: %v", err)
	}
}

// TestPageRefusesForeignHosts: a request naming a host that is not loopback (a DNS-rebinding
// page's) gets neither the page nor the event stream nor an action; the page cannot be framed.
func TestPageRefusesForeignHosts(t *testing.T) {
	srv := natstest.Run(t)
	c, err := New(natstest.Connect(t, srv), WithPoll(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	h := c.Handler()
	cases := []struct {
		name, method, url string
		want              int
	}{
		{"page on loopback", http.MethodGet, "http://127.0.0.1:8422/", http.StatusOK},
		{"page on localhost", http.MethodGet, "http://localhost:8422/", http.StatusOK},
		{"page on ipv6 loopback", http.MethodGet, "http://[::1]:8422/", http.StatusOK},
		{"page on a rebound name", http.MethodGet, "http://evil.example:8422/", http.StatusMisdirectedRequest},
		{"events on a rebound name", http.MethodGet, "http://evil.example:8422/events", http.StatusMisdirectedRequest},
		{"dispose on a rebound name", http.MethodPost, "http://evil.example:8422/api/dispose", http.StatusMisdirectedRequest},
		{"page on a LAN address", http.MethodGet, "http://192.168.1.5:8422/", http.StatusMisdirectedRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // ends an event stream let through
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, tc.method, tc.url, strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("X-Console-Action", "1")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
			if tc.want == http.StatusOK && (w.Header().Get("X-Frame-Options") != "DENY" ||
				!strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'")) {
				t.Fatalf("the page may be framed: %v", w.Header())
			}
		})
	}
}
