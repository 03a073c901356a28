package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// A key with an empty thread_id and agent_id — which the reference accepts — is acquired,
// reused, disposed and swept by its conversation over NATS on the Docker engine, under the
// name and labels the reference derives for it (the empty parts digested, never "any value").
func TestServiceEmptyThreadAndAgent(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	ctx := itest.Context(t)
	spec := itest.FilesSpec(t)
	key := sandbox.Key{Scope: itest.NewKey(t).Scope}
	sibling := sandbox.Key{Scope: key.Scope, ThreadID: "other", AgentID: "agent"} // must survive

	sb := itest.AcquireRemote(t, c, e.Backend, key, spec)
	itest.AcquireRemote(t, c, e.Backend, sibling, spec)
	name := docker.ContainerName(key, spec.Kind, "")
	const empty = "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"
	labels := dockertest.Docker(t, "inspect", "--format",
		`{{index .Config.Labels "maf-sandbox.thread"}} {{index .Config.Labels "maf-sandbox.agent"}}`, name)
	if got := strings.TrimSpace(labels); got != empty+" "+empty {
		t.Fatalf("thread and agent labels of %s = %q, want the digest of the empty string", name, got)
	}
	if err := sb.WriteFile(ctx, "kept.txt", []byte("x"), "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	again, err := c.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("acquire again: %v", err)
	}
	if again.InstanceID() != sb.InstanceID() {
		t.Fatalf("the empty key's sandbox was not reused: %s then %s", sb.InstanceID(), again.InstanceID())
	}

	if f := c.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %+v", f)
	}
	assertGone(t, name)

	if _, err := c.Acquire(ctx, key, spec); err != nil {
		t.Fatalf("acquire after dispose: %v", err)
	}
	p := c.DisposeScope(ctx, key.Scope, "")
	if p.Undisposed != nil || p.Disposed != 1 {
		t.Fatalf("dispose scope with an empty thread: %+v", p)
	}
	assertGone(t, name)
	if out := dockertest.Docker(t, "ps", "-q", "--filter", "name=^"+docker.ContainerName(sibling, spec.Kind, "")+"$"); strings.TrimSpace(out) == "" {
		t.Fatal("the sweep of the empty thread removed another conversation's sandbox")
	}
}

func assertGone(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, _ := dockertest.DockerErr(ctx, "ps", "-aq", "--filter", "name=^"+name+"$")
	if strings.TrimSpace(string(out)) != "" {
		t.Fatalf("%s is still there", name)
	}
}

// A reap sent over the API publishes its sweep's reap.completed summary, as engine reap
// --nats-url does: a real subscriber on the engine's NATS server receives it, with the
// sweep's scope and counts.
func TestServiceReapPublishesCompleted(t *testing.T) {
	dockertest.Require(t)
	url := itest.StartServe(t, nil)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	summaries := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(events.DefaultSubjectPrefix+".reap.completed", summaries)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	c, err := client.New(itest.Context(t), nc)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	key := itest.NewKey(t)
	b := itest.NewBackend(t) // only to dispose whatever the test leaves
	itest.AcquireRemote(t, c, b, key, itest.BusyboxSpec(t))
	time.Sleep(1100 * time.Millisecond) // older than the cutoff below
	res, err := c.Reap(itest.Context(t), time.Second, key.Scope)
	if err != nil {
		t.Fatalf("reap over the API: %v", err)
	}
	if res.Disposed != 1 {
		t.Fatalf("reap result %+v, want one sandbox disposed", res)
	}
	select {
	case m := <-summaries:
		var ev events.ReapCompletedEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("reap.completed is not the event: %v\n%s", err, m.Data)
		}
		if ev.Schema != events.SchemaReapCompleted || ev.Scope == nil || *ev.Scope != key.Scope || ev.Disposed != 1 || ev.EngineID == "unknown" {
			t.Fatalf("reap.completed %s", m.Data)
		}
		if m.Header.Get("Nats-Msg-Id") != ev.EventID {
			t.Fatalf("Nats-Msg-Id %q, event %q", m.Header.Get("Nats-Msg-Id"), ev.EventID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no reap.completed within 30 s of a reap over the API")
	}
}
