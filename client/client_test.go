package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every option refuses a value it cannot use with an invalid-argument error, before any
// request goes out; a nil option is skipped.
func TestOptionsRefuseBadValues(t *testing.T) {
	f := newFakeEngine(t)
	nc := natstest.Connect(t, f.srv)
	cases := []struct {
		name    string
		opts    []client.Option
		wantErr bool
	}{
		{name: "defaults", opts: nil},
		{name: "nil option skipped", opts: []client.Option{nil, client.WithLogger(nil), client.WithLogger(zap.NewNop())}},
		{name: "prefix with a wildcard", opts: []client.Option{client.WithPrefix("maf.*")}, wantErr: true},
		{name: "empty prefix", opts: []client.Option{client.WithPrefix("")}, wantErr: true},
		{name: "engine ID with a dot", opts: []client.Option{client.WithEngine("e.1")}, wantErr: true},
		{name: "zero call timeout", opts: []client.Option{client.WithCallTimeout(0)}, wantErr: true},
		{name: "negative retry wait", opts: []client.Option{client.WithRetryWait(-time.Second)}, wantErr: true},
		{name: "negative liveness interval", opts: []client.Option{client.WithLivenessInterval(-1)}, wantErr: true},
		{name: "negative drop retry", opts: []client.Option{client.WithDropRetry(-1)}, wantErr: true},
		{name: "negative reconnect grace", opts: []client.Option{client.WithReconnectGrace(-1)}, wantErr: true},
		{name: "nil placement", opts: []client.Option{client.WithPlacement(nil)}, wantErr: true},
		{name: "the first error stops construction",
			opts: []client.Option{client.WithCallTimeout(-1), client.WithPrefix("maf.*")}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.requests(f.shared(messages.SubjectDeclarationsT)))
			c, err := client.New(ctxT(t), nc, tc.opts...)
			sent := len(f.requests(f.shared(messages.SubjectDeclarationsT))) - before
			if !tc.wantErr {
				if err != nil || c.Name() != fakeBackend || sent != 1 {
					t.Fatalf("New = %v, %v after %d requests; want the fake backend after one", c, err, sent)
				}
				return
			}
			var ia *sandbox.InvalidArgumentError
			if !errors.Is(err, sandbox.ErrInvalid) || !errors.As(err, &ia) {
				t.Fatalf("New = %v (%T), want a *sandbox.InvalidArgumentError", err, err)
			}
			if sent != 0 {
				t.Fatalf("a refused option still sent %d requests", sent)
			}
		})
	}
	if _, err := client.New(ctxT(t), nil); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("New without a connection = %v, want the invalid-argument family", err)
	}
}

// New reads the pool's declarations once and takes the selected backend's; an answer it
// cannot use is a typed error.
func TestNewReadsTheDeclarations(t *testing.T) {
	f := newFakeEngine(t)
	c := f.client()
	if c.Name() != fakeBackend || c.Isolation() != sandbox.IsolationContainer || !c.Declarations().Capabilities.Has(sandbox.Snapshot) {
		t.Fatalf("declarations: %s %s %v", c.Name(), c.Isolation(), c.Declarations())
	}
	m := f.requests(f.shared(messages.SubjectDeclarationsT))[0]
	if req := decode[messages.APIDeclarationsRequest](t, m); req.Type != messages.APIDeclarationsRequestType {
		t.Fatalf("declarations request type %q", req.Type)
	}

	cases := []struct {
		name  string
		reply handler
		check func(error) bool
	}{
		{name: "no selected backend", reply: reply(&messages.APIDeclarationsResponse{
			APIResponse: messages.APIResponse{Type: messages.APIDeclarationsResponseType}, Selected: "other", ChunkSize: 4,
			Backends: []messages.APIBackend{{Name: fakeBackend}}}),
			check: func(err error) bool {
				var nb *sandbox.NoBackendError
				return errors.As(err, &nb) && nb.Selected == "other" && errors.Is(err, sandbox.ErrNoBackend)
			}},
		{name: "no chunk size", reply: declarations(0), check: func(err error) bool {
			var pe *sandbox.ProtocolError
			return errors.As(err, &pe) && errors.Is(err, sandbox.ErrProtocol)
		}},
		{name: "an error reply", reply: failWith(&sandbox.UnsupportedError{Backend: "fake", Op: "declarations"}), check: func(err error) bool {
			var ue *sandbox.UnsupportedError
			return errors.As(err, &ue) && ue.Op == "declarations" && errors.Is(err, sandbox.ErrUnsupported)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newBareEngine(t)
			g.handle(g.shared(messages.SubjectDeclarationsT), tc.reply)
			_, err := client.New(ctxT(t), natstest.Connect(t, g.srv), client.WithRetryWait(0))
			if !tc.check(err) {
				t.Fatalf("New = %v (%T)", err, err)
			}
		})
	}
}

// With no engine subscribed, New retries for the retry wait, then fails as unavailable.
func TestNewWithoutAnEngineIsUnavailable(t *testing.T) {
	srv := natstest.Run(t)
	start := time.Now()
	_, err := client.New(ctxT(t), natstest.Connect(t, srv), client.WithRetryWait(300*time.Millisecond))
	var ue *messages.EngineUnavailableError
	if !errors.Is(err, messages.ErrUnavailable) || !errors.As(err, &ue) {
		t.Fatalf("New = %v (%T), want a *messages.EngineUnavailableError", err, err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the retry wait", waited)
	}
}

// The prefix and a pinned engine decide the subjects of cold calls.
func TestPrefixAndEngineChooseTheSubjects(t *testing.T) {
	t.Run("prefix", func(t *testing.T) {
		f := newBareEngine(t)
		f.prefix = "tenant.a"
		f.handle(f.shared(messages.SubjectDeclarationsT), declarations(fakeChunkSize))
		f.handle(f.shared(messages.SubjectHealthT), reply(response(messages.APIHealthResponseType)))
		c := f.client(client.WithPrefix("tenant.a"))
		if _, err := c.Health(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if n := len(f.requests("tenant.a.v1.health")); n != 1 {
			t.Fatalf("%d health requests under the prefix, want 1", n)
		}
	})
	t.Run("engine", func(t *testing.T) {
		f := newBareEngine(t)
		f.handle(f.engine(messages.SubjectEngineDeclarationsT), declarations(fakeChunkSize))
		f.handle(f.engine(messages.SubjectEngineHealthT), reply(response(messages.APIHealthResponseType)))
		c := f.client(client.WithEngine(fakeEngineID))
		if _, err := c.Health(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if len(f.requests(f.engine(messages.SubjectEngineDeclarationsT))) != 1 || len(f.requests(f.engine(messages.SubjectEngineHealthT))) != 1 {
			t.Fatalf("a pinned client used the pool's subjects")
		}
	})
}

// An acquire goes to the pool with the key and spec in its body, the caller's deadline as
// wait_ms and the context's request ID as a header; the handle it returns sends every call to
// the engine that holds it.
func TestAcquireRequestAndHandle(t *testing.T) {
	f := newFakeEngine(t)
	c := f.client()
	f.handle(f.shared(messages.SubjectAcquireT), acquireReply("h1"))
	ctx, cancel := context.WithTimeout(client.ContextWithRequestID(t.Context(), "req-1"), 20*time.Second)
	defer cancel()
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*client.Sandbox)
	if s.Handle() != "h1" || s.Engine() != fakeEngineID || s.InstanceID() != "i1" || s.WorkDir() != "/work" || !s.Created() {
		t.Fatalf("sandbox %+v", s)
	}
	m := f.requests(f.shared(messages.SubjectAcquireT))[0]
	req := decode[messages.APIAcquireRequest](t, m)
	if req.Type != messages.APIAcquireRequestType || req.Key == nil || *req.Key != *messages.KeyToWire(testKey) || req.Spec.Kind != "k" {
		t.Fatalf("acquire request %+v", req)
	}
	if req.WaitMS <= 0 || req.WaitMS > 20_000 {
		t.Fatalf("wait_ms %d, want the 20 s left of the deadline", req.WaitMS)
	}
	if got := m.Header.Get(messages.RequestIDHeader); got != "req-1" {
		t.Fatalf("request ID header %q, want req-1", got)
	}

	f.handle(f.engine(messages.SubjectStatFileT), reply(&messages.APIStatFileResponse{
		APIResponse: messages.APIResponse{Type: messages.APIStatFileResponseType}}))
	if st, err := s.StatFile(ctxT(t), "a.txt", "."); err != nil || st != nil {
		t.Fatalf("stat = %+v, %v; want absent", st, err)
	}
	stat := decode[messages.APIStatFileRequest](t, f.requests(f.engine(messages.SubjectStatFileT))[0])
	if stat.Sandbox != "h1" || *stat.Key != *messages.KeyToWire(testKey) || stat.Path != "a.txt" || stat.WorkDir != "." {
		t.Fatalf("stat request %+v", stat)
	}
	if id := f.requests(f.engine(messages.SubjectStatFileT))[0].Header.Get(messages.RequestIDHeader); id == "" || id == "req-1" {
		t.Fatalf("a call without a request ID sent request ID %q, want one of its own", id)
	}
}

// A key acquired before goes to the engine that served it; when that engine does not answer,
// the pool serves it.
func TestAcquireReturnsToTheEngineThatServedTheKey(t *testing.T) {
	f := newFakeEngine(t)
	c := f.client()
	f.handle(f.shared(messages.SubjectAcquireT), acquireReply("h1"))
	for range 2 {
		if _, err := c.Acquire(ctxT(t), testKey, testSpec(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.requests(f.shared(messages.SubjectAcquireT))); n != 2 {
		t.Fatalf("the pool got %d acquires, want 2 (the engine's own subject had nobody)", n)
	}
	f.handle(f.engine(messages.SubjectEngineAcquireT), acquireReply("h1"))
	if _, err := c.Acquire(ctxT(t), testKey, testSpec(t)); err != nil {
		t.Fatal(err)
	}
	if len(f.requests(f.engine(messages.SubjectEngineAcquireT))) != 1 || len(f.requests(f.shared(messages.SubjectAcquireT))) != 2 {
		t.Fatalf("the third acquire did not go to the engine that served the key")
	}
	// Another key has no engine yet: the pool.
	other := testKey
	other.AgentID = "b"
	if _, err := c.Acquire(ctxT(t), other, testSpec(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests(f.shared(messages.SubjectAcquireT))); n != 3 {
		t.Fatalf("a new key's acquire did not go to the pool (%d pool acquires)", n)
	}
}

// A placement record decides where a key's acquire goes, and a key with none goes to the pool.
func TestPlacementRoutesTheAcquire(t *testing.T) {
	f := newFakeEngine(t)
	p := placementOf{testKey: fakeEngineID}
	c := f.client(client.WithPlacement(p))
	f.handle(f.shared(messages.SubjectAcquireT), acquireReply("h1"))
	f.handle(f.engine(messages.SubjectEngineAcquireT), acquireReply("h1"))
	other := testKey
	other.AgentID = "b"
	for _, k := range []sandbox.Key{testKey, other} {
		if _, err := c.Acquire(ctxT(t), k, testSpec(t)); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.requests(f.engine(messages.SubjectEngineAcquireT))) != 1 || len(f.requests(f.shared(messages.SubjectAcquireT))) != 1 {
		t.Fatalf("the recorded key did not go to its owner, or the other not to the pool")
	}
}

type placementOf map[sandbox.Key]string

func (p placementOf) Owner(key sandbox.Key, _ string) (string, bool) {
	e, ok := p[key]
	return e, ok
}

// An acquire reply that names no handle breaks the protocol.
func TestAcquireReplyWithoutAHandle(t *testing.T) {
	f := newFakeEngine(t)
	c := f.client()
	f.handle(f.shared(messages.SubjectAcquireT), reply(response(messages.APIAcquireResponseType)))
	_, err := c.Acquire(ctxT(t), testKey, testSpec(t))
	var pe *sandbox.ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("acquire = %v, want a *sandbox.ProtocolError", err)
	}
	if _, err := c.Acquire(ctxT(t), testKey, sandbox.Spec{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("acquire of an unbuilt spec = %v, want the invalid-argument family", err)
	}
}

// A dispose that cannot be made is reported as a disposal failure of the right code, never
// as an error; a clean one forgets where the key was served.
func TestDisposeFailureCodes(t *testing.T) {
	cases := []struct {
		name  string
		setup func(f *fakeEngine)
		ctx   func(t *testing.T) context.Context
		want  sandbox.DisposalCode
	}{
		{name: "no engine is unreachable", setup: func(*fakeEngine) {}, want: sandbox.DisposalUnreachable},
		{name: "an invalid request is refused",
			setup: func(f *fakeEngine) {
				f.handle(f.shared(messages.SubjectDisposeT), failWith(&messages.BadRequestError{Reason: "no", Field: "key.scope"}))
			}, want: sandbox.DisposalRefused},
		{name: "an engine that never answers times out",
			setup: func(f *fakeEngine) { f.handle(f.shared(messages.SubjectDisposeT), func(*nats.Msg) any { return nil }) },
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			}, want: sandbox.DisposalTimeout},
		{name: "any other error is unknown",
			setup: func(f *fakeEngine) { f.handle(f.shared(messages.SubjectDisposeT), failWith(errors.New("boom"))) },
			want:  sandbox.DisposalUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			c := f.client()
			tc.setup(f)
			ctx := ctxT(t)
			if tc.ctx != nil {
				ctx = tc.ctx(t)
			}
			fail := c.Dispose(ctx, testKey, sandbox.DisposeOptions{})
			if fail == nil || fail.Code != tc.want {
				t.Fatalf("dispose = %+v, want code %s", fail, tc.want)
			}
		})
	}
	t.Run("a clean dispose forgets the key's engine", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client()
		f.acquired(c)
		f.handle(f.engine(messages.SubjectEngineDisposeT), reply(response(messages.APIDisposeResponseType)))
		f.handle(f.engine(messages.SubjectEngineAcquireT), acquireReply("h1"))
		if fail := c.Dispose(ctxT(t), testKey, sandbox.DisposeOptions{}); fail != nil {
			t.Fatalf("dispose: %+v", fail)
		}
		req := decode[messages.APIDisposeRequest](t, f.requests(f.engine(messages.SubjectEngineDisposeT))[0])
		if req.Type != messages.APIDisposeRequestType || *req.Key != *messages.KeyToWire(testKey) || req.Kind != nil {
			t.Fatalf("dispose request %+v", req)
		}
		if _, err := c.Acquire(ctxT(t), testKey, testSpec(t)); err != nil {
			t.Fatal(err)
		}
		if len(f.requests(f.engine(messages.SubjectEngineAcquireT))) != 0 || len(f.requests(f.shared(messages.SubjectAcquireT))) != 2 {
			t.Fatalf("the acquire after a dispose did not go to the pool")
		}
	})
}
