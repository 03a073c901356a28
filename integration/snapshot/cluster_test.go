package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// serveOn starts engine id over nc: a backend keeping its snapshots in the cluster's object
// store, its router, and its service (with placement when js is given).
func serveOn(t *testing.T, nc *nats.Conn, id string, opts ...service.Option) *actors.Backend {
	t.Helper()
	store, err := events.NewSnapshots(itest.Context(t), nc)
	if err != nil {
		t.Fatal(err)
	}
	b := itest.NewBackend(t, actors.WithSnapshotStore(store))
	router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(nc, router, append([]service.Option{service.WithEngineID(id), service.WithLogger(zaptest.NewLogger(t).Named(id))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = svc.Stop(ctx)
	})
	return b
}

func clientOn(t *testing.T, url string, opts ...client.Option) *client.Backend {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := client.New(itest.Context(t), nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A snapshot taken on one engine of a three-engine cluster (three NATS nodes in containers,
// each engine on its own node) is kept in JetStream and restored on another, which then holds
// the sandbox: placement sends the key's later acquires there. A fork on the pool makes new
// sandboxes from it on the engine that answered.
func TestSnapshotRestoredOnAnotherEngine(t *testing.T) {
	c := natscluster.Run(t, 3)
	for i := range 3 {
		nc, err := nats.Connect(c.URL(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("snap%d", i+1)
		p, err := placement.New(itest.Context(t), js, id, placement.WithReplicas(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		serveOn(t, nc, id, service.WithPlacement(p))
	}
	ctx := itest.Context(t)
	first := clientOn(t, c.URL(0), client.WithEngine("snap1"))
	third := clientOn(t, c.URL(2), client.WithEngine("snap3"))
	pool := clientOn(t, c.URL(1))
	key, restoredKey, sp := itest.NewKey(t), itest.NewKey(t), spec(t)
	for _, k := range []sandbox.Key{key, restoredKey} {
		t.Cleanup(func() { pool.Dispose(context.Background(), k, sandbox.DisposeOptions{}) })
	}
	sb, err := first.Acquire(ctx, key, sp)
	if err != nil {
		t.Fatal(err)
	}
	want := itest.Sh(t, sb, "mkdir -p /data && dd if=/dev/urandom of=/data/big bs=1M count=50 2>/dev/null && sha256sum /data/big")
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot on snap1: %v", err)
	}
	t.Cleanup(func() { _ = pool.DeleteSnapshot(context.Background(), snap.ID) })
	if snap.Bytes < 50<<20 {
		t.Fatalf("snapshot %+v holds less than the 50 MiB written", snap)
	}
	began := time.Now()
	restored, err := third.Restore(ctx, restoredKey, sp, snap.ID)
	if err != nil {
		t.Fatalf("restore on snap3: %v", err)
	}
	t.Logf("restored a %d MiB snapshot on another engine in %s", snap.Bytes>>20, time.Since(began).Round(time.Millisecond))
	if e := restored.(*client.Sandbox).Engine(); e != "snap3" {
		t.Fatalf("restored on %s, want snap3", e)
	}
	if got := itest.Sh(t, restored, "sha256sum /data/big"); got != want {
		t.Fatalf("restored file %q, want %q", got, want)
	}
	again, err := pool.Acquire(ctx, restoredKey, sp)
	if err != nil {
		t.Fatal(err)
	}
	if e := again.(*client.Sandbox).Engine(); e != "snap3" || again.InstanceID() != restored.InstanceID() {
		t.Fatalf("the pool acquired the restored key on %s (%s), want snap3's %s", e, again.InstanceID(), restored.InstanceID())
	}
	forks := []sandbox.Key{itest.NewKey(t), itest.NewKey(t)}
	for _, k := range forks {
		t.Cleanup(func() { pool.Dispose(context.Background(), k, sandbox.DisposeOptions{}) })
	}
	sbs, err := pool.Fork(ctx, snap.ID, forks, sp)
	if err != nil {
		t.Fatalf("fork on the pool: %v", err)
	}
	for _, f := range sbs {
		if got := itest.Sh(t, f, "sha256sum /data/big"); got != want {
			t.Fatalf("forked file %q, want %q", got, want)
		}
	}
	if list, err := pool.Snapshots(ctx, key.Scope, key.ThreadID); err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("the pool lists %+v, %v", list, err)
	}
}

// A tenant can neither restore nor fork nor read another tenant's snapshot: two NATS accounts,
// each with the scope of its own name, on one engine with tenancy.
func TestTenantCannotTouchAnothersSnapshot(t *testing.T) {
	srv := natstest.RunTenants(t, "ENGINE", messages.DefaultPrefix, "alice", "bob")
	serveOn(t, natstest.ConnectAs(t, srv, "ENGINE"), "tenants", service.WithTenancy(service.DefaultTenancy()))
	alice, err := client.New(itest.Context(t), natstest.ConnectAs(t, srv, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := client.New(itest.Context(t), natstest.ConnectAs(t, srv, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := itest.Context(t)
	sp := spec(t)
	aliceKey := sandbox.Key{Scope: "alice", ThreadID: itest.NewKey(t).Scope, AgentID: "a"}
	bobKey := sandbox.Key{Scope: "bob", ThreadID: aliceKey.ThreadID, AgentID: "b"}
	t.Cleanup(func() { alice.Dispose(context.Background(), aliceKey, sandbox.DisposeOptions{}) })
	t.Cleanup(func() { bob.Dispose(context.Background(), bobKey, sandbox.DisposeOptions{}) })
	sb, err := alice.Acquire(ctx, aliceKey, sp)
	if err != nil {
		t.Fatal(err)
	}
	itest.Sh(t, sb, "echo alice-secret > /secret")
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.DeleteSnapshot(context.Background(), snap.ID) })
	forbidden := func(what string, err error) {
		t.Helper()
		var fe *messages.ForbiddenError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "alice") {
			t.Fatalf("bob's %s of alice's snapshot = %v, want forbidden", what, err)
		}
	}
	_, err = bob.Restore(ctx, bobKey, sp, snap.ID)
	forbidden("restore", err)
	_, err = bob.Fork(ctx, snap.ID, []sandbox.Key{bobKey}, sp)
	forbidden("fork", err)
	_, err = bob.DescribeSnapshot(ctx, snap.ID)
	forbidden("describe", err)
	forbidden("delete", bob.DeleteSnapshot(ctx, snap.ID))
	if _, err := bob.Snapshots(ctx, "alice", aliceKey.ThreadID); !errors.As(err, new(*messages.ForbiddenError)) {
		t.Fatalf("bob's listing of alice's scope = %v, want forbidden", err)
	}
	// Into her own scope, alice's own snapshot restores; into bob's scope, she may not fork.
	if _, err := alice.Fork(ctx, snap.ID, []sandbox.Key{bobKey}, sp); !errors.As(err, new(*messages.ForbiddenError)) {
		t.Fatalf("alice's fork into bob's scope = %v, want forbidden", err)
	}
	restored, err := alice.Restore(ctx, aliceKey, sp, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := itest.Sh(t, restored, "cat /secret"); got != "alice-secret\n" {
		t.Fatalf("alice's restore reads %q", got)
	}
}
