package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// TestServePlacementOneContainerPerKey runs two `engine serve --placement` processes on one
// NATS (the first one's embedded server) and this machine's daemon: workers acquiring one key
// through both engines at once get one container, and a client that never saw the acquire
// finds it by its key and reads what the first wrote.
func TestServePlacementOneContainerPerKey(t *testing.T) {
	bin := buildEngine(t)
	url, _ := serveEngineArgs(t, bin, "--placement", "--engine-id", "pa")
	_, _, pb := serveEngineProc(t, bin, "--placement", "--engine-id", "pb", "--nats-url", url)
	image := dockertest.Busybox(t)
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(image))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	key := sandbox.Key{Scope: "place-" + hex.EncodeToString(b), ThreadID: "thread", AgentID: "agent"}
	newClient := func() *client.Backend {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c, err := client.New(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := newClient()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := first.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose: %v", f)
		}
	})
	const workers = 8
	var wg sync.WaitGroup
	engines := make([]string, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient() // each its own client: the pool spreads their acquires over both engines
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			sb, err := c.Acquire(ctx, key, spec)
			if err != nil {
				t.Errorf("worker %d: acquire: %v", w, err)
				return
			}
			engines[w] = sb.(*client.Sandbox).Engine()
		}()
	}
	wg.Wait()
	for w := range workers {
		if engines[w] != engines[0] {
			t.Fatalf("workers were served by %v, want one engine", engines)
		}
	}
	ids := dockertest.Docker(t, "ps", "-a", "-q", "--filter", "label="+label.Scope+"="+label.Value(key.Scope),
		"--filter", "label="+dockertest.LabelProcess)
	if n := len(strings.Fields(ids)); n != 1 {
		t.Fatalf("%d containers for the key, want 1", n)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sb, err := first.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "note.txt", []byte("from the first client"), "."); err != nil {
		t.Fatal(err)
	}
	// Both engines announce themselves, with the daemon they drive.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	members, err := placement.NewMembers(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	list, err := members.List(ctx)
	if err != nil || len(list) != 2 || list[0].Engine != "pa" || list[1].Engine != "pb" ||
		list[0].Daemon == "" || list[0].Daemon != list[1].Daemon {
		t.Fatalf("members %+v, %v; want pa and pb on one daemon", list, err)
	}
	for range 4 {
		sb2, err := newClient().Acquire(ctx, key, spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sb2.ReadFile(ctx, "note.txt", ".", 100)
		if err != nil || string(got) != "from the first client" {
			t.Fatalf("a client that never saw the acquire reads %q, %v (on %s, owner %s)", got, err,
				sb2.(*client.Sandbox).Engine(), engines[0])
		}
	}

	// SIGUSR1 puts pb in lame duck: it says so, and new keys all go to pa.
	if err := pb.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	pinned := func() *client.Backend {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		c, err := client.New(ctx, nc, client.WithEngine("pb"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := pinned.Health(ctx)
		if err == nil && h.Status == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pb after SIGUSR1: %+v, %v; want draining", h, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pool := newClient()
	for i := range 4 {
		k := key
		k.AgentID = fmt.Sprint("new-", i)
		t.Cleanup(func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if f := pool.Dispose(dctx, k, sandbox.DisposeOptions{}); f != nil {
				t.Errorf("dispose: %v", f)
			}
		})
		sb, err := pool.Acquire(ctx, k, spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := sb.(*client.Sandbox).Engine(); got != "pa" {
			t.Fatalf("a new key went to %s while pb drains, want pa", got)
		}
	}
}
