package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
	"github.com/mafsandbox/engine/service"
)

// placementStore opens a placement store for engine on srv over its own connection.
func placementStore(t *testing.T, srv *server.Server, engine string, opts ...placement.Option) *placement.Store {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	p, err := placement.New(ctxT(t), js, engine, opts...)
	if err != nil {
		t.Fatalf("placement store: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// placedEngines starts n engines with placement on one server, each on its own fake backend.
func placedEngines(t *testing.T, n int, opts ...placement.Option) (*server.Server, []*engine) {
	t.Helper()
	srv := natstest.Run(t)
	var es []*engine
	for i := range n {
		p := placementStore(t, srv, fmt.Sprintf("e%d", i+1), opts...)
		es = append(es, startEngineOn(t, srv, newFake(t), service.WithPlacement(p)))
	}
	return srv, es
}

// TestPlacementOneSandboxPerKeyAcrossEngines: 30 workers acquire 6 keys at once through the
// pool of 3 engines; each key's sandbox exists on exactly one engine's backend, the one its
// placement record names, and every worker of a key got a handle on that engine.
func TestPlacementOneSandboxPerKeyAcrossEngines(t *testing.T) {
	srv, es := placedEngines(t, 3)
	observer := placementStore(t, srv, "observer")
	const workers, keys = 30, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	served := map[sandbox.Key]map[string]bool{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, es[0]) // a client of its own: no shared memory of placements
			key := sandbox.Key{Scope: "s", ThreadID: fmt.Sprint(w % keys), AgentID: "a"}
			sb, err := c.Acquire(ctxT(t), key, testSpec(t))
			if err != nil {
				t.Errorf("acquire %v: %v", key, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if served[key] == nil {
				served[key] = map[string]bool{}
			}
			served[key][sb.(*client.Sandbox).Engine()] = true
		}()
	}
	wg.Wait()
	live := map[sandbox.SandboxID]string{}
	for _, e := range es {
		for _, id := range e.fake.Live() {
			if other, ok := live[id]; ok {
				t.Errorf("%v is live on %s and %s", id, other, e.svc.EngineID())
			}
			live[id] = e.svc.EngineID()
		}
	}
	if len(live) != keys {
		t.Fatalf("%d sandboxes live across the engines, want %d: %v", len(live), keys, live)
	}
	for id, eng := range live {
		if len(served[id.Key]) != 1 || !served[id.Key][eng] {
			t.Errorf("%v lives on %s but was served by %v", id.Key, eng, served[id.Key])
		}
		if owner, ok := observer.Owner(id.Key, id.Kind); !ok || owner != eng {
			t.Errorf("%v lives on %s, placement says %q (%v)", id.Key, eng, owner, ok)
		}
	}
}

// TestPlacementSecondClientDrivesTheSandboxByKey: a client that never saw the acquire finds the
// sandbox by its key — through the placement record, and through the pool, whose engine
// forwards the acquire to the owner.
func TestPlacementSecondClientDrivesTheSandboxByKey(t *testing.T) {
	srv, es := placedEngines(t, 3)
	first := newClient(t, es[0])
	ctx := ctxT(t)
	sb, err := first.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	owner := sb.(*client.Sandbox).Engine()
	if err := sb.WriteFile(ctx, "note.txt", []byte("hello"), "."); err != nil {
		t.Fatal(err)
	}
	observer := placementStore(t, srv, "observer")
	for name, opts := range map[string][]client.Option{
		"placement": {client.WithPlacement(observer)},
		"pool":      nil,
	} {
		t.Run(name, func(t *testing.T) {
			second := newClient(t, es[0], opts...)
			for range 5 { // several, so that the pool's queue group reaches non-owners too
				sb2, err := second.Acquire(ctx, testKey, testSpec(t))
				if err != nil {
					t.Fatal(err)
				}
				if got := sb2.(*client.Sandbox).Engine(); got != owner {
					t.Fatalf("second client got a sandbox on %s, the owner is %s", got, owner)
				}
				if b, err := sb2.ReadFile(ctx, "note.txt", ".", 100); err != nil || string(b) != "hello" {
					t.Fatalf("read the first client's file: %q, %v", b, err)
				}
			}
		})
	}
}

// fixedPlacement names one engine for every key.
type fixedPlacement string

func (f fixedPlacement) Owner(sandbox.Key, string) (string, bool) { return string(f), true }

// TestClientRoutesAcquiresByPlacement: with a placement, a key's acquire goes to the engine the
// placement names, not to the pool.
func TestClientRoutesAcquiresByPlacement(t *testing.T) {
	_, es := placedEngines(t, 2)
	c := newClient(t, es[0], client.WithPlacement(fixedPlacement(es[1].svc.EngineID())))
	for i := range 6 {
		sb, err := c.Acquire(ctxT(t), sandbox.Key{Scope: "s", ThreadID: fmt.Sprint(i), AgentID: "a"}, testSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := sb.(*client.Sandbox).Engine(); got != es[1].svc.EngineID() {
			t.Fatalf("acquire %d served by %s, placement names %s", i, got, es[1].svc.EngineID())
		}
	}
	if n := len(es[0].fake.Acquires()); n != 0 {
		t.Fatalf("the engine placement does not name served %d acquires", n)
	}
}

// TestPlacementLostLeaseStopsServing: when the engine's entry is overwritten (another engine took
// the sandbox over), the renewal finds the lease lost and the engine refuses further calls on
// the sandbox instead of serving it.
func TestPlacementLostLeaseStopsServing(t *testing.T) {
	srv, es := placedEngines(t, 1, placement.WithLease(300*time.Millisecond))
	c := newClient(t, es[0], client.WithRetryWait(0))
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.StatFile(ctx, ".", "."); err != nil {
		t.Fatalf("stat while owned: %v", err)
	}
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, placement.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"engine":"thief","expires":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
	if _, err := kv.Put(ctx, placement.EntryKey(testKey, "shell"), []byte(rec)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := sb.StatFile(ctx, ".", ".")
		if err != nil {
			if !errors.Is(err, messages.ErrUnavailable) && !errors.Is(err, sandbox.ErrGone) && !errors.As(err, new(*messages.UnknownSandboxError)) {
				t.Fatalf("a call after the lease was lost failed with %v, want engine_unavailable or unknown_sandbox", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine kept serving a sandbox whose lease it lost")
		}
		time.Sleep(50 * time.Millisecond)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Sandboxes != 0 {
		t.Fatalf("health after the loss: %+v, %v; want 0 sandboxes", h, err)
	}
}

// TestPlacementEntriesGoWithDisposeAndStop: dispose releases the sandbox's entry, scope purge
// the conversation's, and a stopping engine the rest.
func TestPlacementEntriesGoWithDisposeAndStop(t *testing.T) {
	srv, es := placedEngines(t, 1)
	observer := placementStore(t, srv, "observer")
	c := newClient(t, es[0])
	ctx := ctxT(t)
	keyN := func(s, th string) sandbox.Key { return sandbox.Key{Scope: s, ThreadID: th, AgentID: "a"} }
	for _, k := range []sandbox.Key{keyN("s", "1"), keyN("s", "2"), keyN("s", "3")} {
		if _, err := c.Acquire(ctx, k, testSpec(t)); err != nil {
			t.Fatal(err)
		}
	}
	placed := func(k sandbox.Key) bool { _, ok := observer.Owner(k, "shell"); return ok }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("all three placed", func() bool { return placed(keyN("s", "1")) && placed(keyN("s", "2")) && placed(keyN("s", "3")) })
	if f := c.Dispose(ctx, keyN("s", "1"), sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %+v", f)
	}
	waitFor("the disposed key's entry goes", func() bool { return !placed(keyN("s", "1")) })
	if p := c.DisposeScope(ctx, "s", "2"); p.Undisposed != nil {
		t.Fatalf("dispose scope: %+v", p)
	}
	waitFor("the purged conversation's entry goes", func() bool { return !placed(keyN("s", "2")) })
	if !placed(keyN("s", "3")) {
		t.Fatalf("an untouched key lost its entry")
	}
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := es[0].svc.Stop(stop); err != nil {
		t.Fatal(err)
	}
	waitFor("the stopped engine's entries go", func() bool { return !placed(keyN("s", "3")) })
}

func TestPlacementMustClaimForThisEngine(t *testing.T) {
	srv := natstest.Run(t)
	p := placementStore(t, srv, "other")
	router, err := sandbox.NewRouter([]sandbox.Backend{newFake(t)}, sandbox.WithMinIsolation(sandbox.IsolationNone))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := service.New(natstest.Connect(t, srv), router, service.WithEngineID("this"), service.WithPlacement(p)); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("New with another engine's store: %v, want an invalid argument", err)
	}
}

// TestPlacementOwnerGoneIsUnavailable: an acquire of a sandbox whose recorded owner no longer
// answers is refused as engine_unavailable (until its lease lapses), not created a second time.
func TestPlacementOwnerGoneIsUnavailable(t *testing.T) {
	srv, es := placedEngines(t, 1)
	ctx := ctxT(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, placement.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"engine":"ghost","expires":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
	if _, err := kv.Put(ctx, placement.EntryKey(testKey, "shell"), []byte(rec)); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, es[0], client.WithRetryWait(0))
	if _, err := c.Acquire(ctx, testKey, testSpec(t)); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("acquire of a sandbox placed on a dead engine: %v, want engine_unavailable", err)
	}
	if n := len(es[0].fake.Acquires()); n != 0 {
		t.Fatalf("the engine created the sandbox another engine owns (%d acquires)", n)
	}
}

// TestPlacementTakeoverAdoptsOnItsDaemonOnly: an engine taking over a lapsed sandbox adopts
// what its daemon holds under the sandbox's name when the previous owner drove the same daemon
// (or either daemon is unrecorded), and disposes it first, so that the acquire creates afresh,
// when the owner drove another daemon: what this daemon holds is an older tenure's.
func TestPlacementTakeoverAdoptsOnItsDaemonOnly(t *testing.T) {
	for _, tc := range []struct {
		name, recorded, here string
		fresh                bool
	}{
		{"same daemon", "d1", "d1", false},
		{"another daemon", "d2", "d1", true},
		{"owner's daemon unrecorded", "", "d1", false},
		{"this daemon unrecorded", "d2", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Run(t)
			fake := newFake(t)
			p := placementStore(t, srv, "taker", placement.WithDaemon(tc.here))
			e := startEngineOn(t, srv, fake, service.WithPlacement(p))
			ctx := ctxT(t)
			js, err := jetstream.New(natstest.Connect(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			kv, err := js.KeyValue(ctx, placement.DefaultBucket)
			if err != nil {
				t.Fatal(err)
			}
			rec := fmt.Sprintf(`{"engine":"lapsed","daemon":%q,"expires":%q}`, tc.recorded,
				time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano))
			if _, err := kv.Put(ctx, placement.EntryKey(testKey, "shell"), []byte(rec)); err != nil {
				t.Fatal(err)
			}
			sb, err := newClient(t, e).Acquire(ctx, testKey, testSpec(t))
			if err != nil {
				t.Fatalf("acquire of a lapsed sandbox: %v", err)
			}
			if got := sb.(*client.Sandbox).Engine(); got != "taker" {
				t.Fatalf("served by %s, want the taker", got)
			}
			d := fake.Disposals()
			switch {
			case tc.fresh && (len(d) != 1 || d[0].Key != testKey || d[0].Options.Kind == nil || *d[0].Options.Kind != "shell"):
				t.Fatalf("disposals %+v, want one of (%v, shell) before the acquire", d, testKey)
			case !tc.fresh && len(d) != 0:
				t.Fatalf("disposals %+v, want none: the container is adopted", d)
			}
			if n := len(fake.Acquires()); n != 1 {
				t.Fatalf("%d acquires, want 1", n)
			}
			// The taker records the instance it handed out, for whoever takes over from it.
			if r, ok, err := p.Get(ctx, testKey, "shell"); err != nil || !ok || r.Engine != "taker" || r.Daemon != tc.here ||
				r.Instance == "" || r.Instance != sb.InstanceID() {
				t.Fatalf("record after the takeover %+v, %v, %v; want the taker's, naming instance %s", r, ok, err, sb.InstanceID())
			}
		})
	}
}

// TestPlacementRenewalsKeepTheInstance: the instance an acquire recorded stays in the entry
// through the renewals that follow, and recording it never cost the engine its lease.
func TestPlacementRenewalsKeepTheInstance(t *testing.T) {
	srv, es := placedEngines(t, 1, placement.WithLease(300*time.Millisecond))
	observer := placementStore(t, srv, "observer")
	c := newClient(t, es[0], client.WithRetryWait(0))
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	first, ok, err := observer.Get(ctx, testKey, "shell")
	if err != nil || !ok || first.Instance != sb.InstanceID() {
		t.Fatalf("record after the acquire %+v, %v, %v; want instance %s", first, ok, err, sb.InstanceID())
	}
	time.Sleep(time.Second) // several renewals, at a third of the lease each
	r, ok, err := observer.Get(ctx, testKey, "shell")
	if err != nil || !ok || r.Revision == first.Revision || r.Instance != sb.InstanceID() {
		t.Fatalf("record after renewals %+v, %v, %v; want renewed, still naming %s", r, ok, err, sb.InstanceID())
	}
	if _, err := sb.StatFile(ctx, ".", "."); err != nil {
		t.Fatalf("a call after the renewals: %v", err)
	}
}

// blockingBackend hands out sandboxes whose StatFile waits for its context: a call that is
// still in flight when something ends it.
type blockingBackend struct{ *sandboxtest.Backend }

func (b blockingBackend) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Backend.Acquire(ctx, key, spec)
	if err != nil {
		return nil, err
	}
	return blockingSandbox{sb}, nil
}

type blockingSandbox struct{ sandbox.Sandbox }

func (blockingSandbox) StatFile(ctx context.Context, _, _ string) (*sandbox.FileStat, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockingSandbox) Exec(ctx context.Context, _ sandbox.Command, _ string, _ time.Duration) (sandbox.ExecResult, error) {
	<-ctx.Done()
	return sandbox.ExecResult{}, ctx.Err()
}

// TestPlacementLostLeaseEndsCallsInFlight: a call admitted while the engine held the lease
// is abandoned when the lease is lost (a file call's freeze is lifted then, before any
// taker's grace is out), and answers interrupted: the call was taken and may have run. The
// client repeats a stat (here not, WithDropRetry(0), so it answers engine_unavailable at once)
// and answers an exec with client.ErrOutcomeUnknown — never by sending it again.
func TestPlacementLostLeaseEndsCallsInFlight(t *testing.T) {
	srv := natstest.Run(t)
	p := placementStore(t, srv, "owner", placement.WithLease(300*time.Millisecond))
	e := startEngineOn(t, srv, blockingBackend{newFake(t)}, service.WithPlacement(p))
	c := newClient(t, e, client.WithRetryWait(0), client.WithDropRetry(0))
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	done, execDone := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := sb.StatFile(ctx, ".", ".")
		done <- err
	}()
	go func() {
		_, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
		execDone <- err
	}()
	time.Sleep(200 * time.Millisecond) // the call is in flight, its lease renewed meanwhile
	select {
	case err := <-done:
		t.Fatalf("the call ended before the lease did: %v", err)
	default:
	}
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, placement.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"engine":"thief","expires":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
	if _, err := kv.Put(ctx, placement.EntryKey(testKey, "shell"), []byte(rec)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, messages.ErrUnavailable) {
			t.Fatalf("the call in flight when the lease was lost: %v, want engine_unavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call outlived the lease")
	}
	select {
	case err := <-execDone:
		var intr *messages.InterruptedError
		if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.As(err, &intr) {
			t.Fatalf("the exec in flight when the lease was lost: %v, want client.ErrOutcomeUnknown from an interrupted call", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the exec outlived the lease")
	}
}
