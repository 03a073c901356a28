package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// TestServeTenancyPlacement: two "engine serve --tenancy --placement" on one server with tenant
// accounts and this machine's Docker. A's sandbox is placed on the first; A's acquire through
// the second is forwarded there with A's identity and finds A's file; B is refused A's key
// through either engine and the pool; A's dispose through the second removes the container.
func TestServeTenancyPlacement(t *testing.T) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	hx := hex.EncodeToString(suffix)
	a, b := "it-pa-"+hx, "it-pb-"+hx
	p1, p2 := "tp1-"+hx, "tp2-"+hx
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a, b)
	for _, id := range []string{p1, p2} {
		itest.StartServe(t, nil, "--nats-url", srv.ClientURL(), "--nats-user", "engine", "--nats-password", natstest.Password,
			"--tenancy", "--placement", "--engine-id", id)
	}
	ctx := itest.Context(t)
	as := func(acc string, opts ...client.Option) *client.Backend {
		c, err := client.New(ctx, natstest.ConnectAs(t, srv, acc), opts...)
		if err != nil {
			t.Fatalf("new client as %s: %v", acc, err)
		}
		return c
	}
	key := sandbox.Key{Scope: a, ThreadID: "t", AgentID: "a"}
	viaP1, viaP2 := as(a, client.WithEngine(p1)), as(a, client.WithEngine(p2))
	t.Cleanup(func() { // on the owner, whatever happened
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := viaP1.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", key, f)
		}
	})
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	sb, err := viaP1.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("A acquires on %s: %v", p1, err)
	}
	if got := sb.(*client.Sandbox).Engine(); got != p1 {
		t.Fatalf("A's sandbox is on %s, want %s", got, p1)
	}
	if err := sb.WriteFile(ctx, "note.txt", []byte("A's"), "."); err != nil {
		t.Fatal(err)
	}
	sb2, err := viaP2.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("A acquires its key through %s (forwarded to %s): %v", p2, p1, err)
	}
	if got := sb2.(*client.Sandbox).Engine(); got != p1 {
		t.Fatalf("A's acquire through %s answered from %s, want the owner %s", p2, got, p1)
	}
	if got, err := sb2.ReadFile(ctx, "note.txt", ".", 100); err != nil || string(got) != "A's" {
		t.Fatalf("A reads its file after the forwarded acquire: %q, %v", got, err)
	}
	for name, c := range map[string]*client.Backend{p1: as(b, client.WithEngine(p1)), p2: as(b, client.WithEngine(p2)), "the pool": as(b)} {
		var fe *messages.ForbiddenError
		if _, err := c.Acquire(ctx, key, spec); !errors.As(err, &fe) {
			t.Errorf("B acquires A's key through %s: %v, want forbidden", name, err)
		}
	}
	containers := func() string {
		return strings.TrimSpace(dockertest.Docker(t, "ps", "-a", "--quiet", "--filter", "label="+label.Scope+"="+label.Value(a)))
	}
	if containers() == "" {
		t.Fatalf("no container carries A's scope label before the dispose")
	}
	if f := viaP2.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("A disposes through %s (forwarded to %s): %v", p2, p1, f)
	}
	if left := containers(); left != "" {
		t.Fatalf("A's dispose through %s left containers: %s", p2, left)
	}
}
