package console

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
	"github.com/mafsandbox/engine/service"
)

// TestScopedConsoleSeesItsScope: a console with WithScope("A") in front of an engine (real
// nats-server, fake backend) holding sandboxes of scopes A and B lists only A's (two), and of the
// audit events of both scopes takes only A's.
func TestScopedConsoleSeesItsScope(t *testing.T) {
	srv := natstest.Run(t)
	fake, err := sandboxtest.New()
	if err != nil {
		t.Fatal(err)
	}
	router, err := sandbox.NewRouter([]sandbox.Backend{fake}, sandbox.WithMinIsolation(sandbox.IsolationNone))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(natstest.Connect(t, srv), router, service.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = svc.Stop(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(ctx, natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage("fake"), sandbox.WithRequires(sandbox.Exec))
	if err != nil {
		t.Fatal(err)
	}
	for i, scope := range []string{"A", "B", "A"} {
		if _, err := cl.Acquire(ctx, sandbox.Key{Scope: scope, ThreadID: fmt.Sprint(i), AgentID: "a"}, spec); err != nil {
			t.Fatal(err)
		}
	}

	nc := natstest.Connect(t, srv)
	c, err := New(nc, WithScope("A"), WithPoll(50*time.Millisecond, time.Hour), WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.state.sandboxesNow()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// Audit events of both scopes: only A's may arrive.
	for _, scope := range []string{"B", "A"} {
		ev := events.AuditEvent{Type: events.AuditSandboxAcquired, ID: "aud_" + scope, Time: time.Now(), Service: "e9",
			Key: &messages.APIKey{Scope: scope, ThreadID: "x", AgentID: "a"}, Kind: "shell", Sandbox: "h" + scope, InstanceID: "i" + scope, Outcome: "created"}
		m, err := events.AuditMessage(events.DefaultSubjectPrefix, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(m.Subject, m.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for len(c.state.sandboxesNow()) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // room for B's event, had it been delivered
	perScope := map[string]int{}
	audited := false
	for _, e := range c.state.sandboxesNow() {
		perScope[e.Key.Scope]++
		audited = audited || e.InstanceID == "iA"
	}
	if perScope["A"] != 3 || perScope["B"] != 0 || len(perScope) != 1 || !audited {
		t.Fatalf("the scoped console shows %v sandboxes per scope (A's audited one: %t), want A's two listed and its audited one, none of B", perScope, audited)
	}
}
