package client_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The fake engine's identity and limits, as its declarations reply gives them.
const (
	fakeEngineID  = "e1"
	fakeBackend   = "fake"
	fakeChunkSize = 4
	fakeMaxFile   = 64
)

var testKey = sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}

// fakeEngine stands in for an engine on an embedded NATS server: it answers only the
// subjects a test gives it a handler for, and records every request it receives, so a test
// sees exactly what the client put on the wire and decides exactly what comes back.
type fakeEngine struct {
	t      *testing.T
	srv    *server.Server
	nc     *nats.Conn // the engine's own connection
	prefix string

	mu  sync.Mutex
	got map[string][]*nats.Msg
}

// handler answers one request: nil sends no reply, a []byte is sent as it is, anything else
// as its JSON.
type handler func(m *nats.Msg) any

// newFakeEngine is a fake engine on a server of its own that answers the pool's declarations
// with [declarations].
func newFakeEngine(t *testing.T) *fakeEngine {
	t.Helper()
	f := newBareEngine(t)
	f.handle(f.shared(messages.SubjectDeclarationsT), declarations(fakeChunkSize))
	return f
}

// newBareEngine is a fake engine that answers nothing yet.
func newBareEngine(t *testing.T) *fakeEngine {
	t.Helper()
	srv := natstest.Run(t)
	return &fakeEngine{t: t, srv: srv, nc: natstest.Connect(t, srv), prefix: messages.DefaultPrefix, got: map[string][]*nats.Msg{}}
}

// handle subscribes subject and answers its requests with h.
func (f *fakeEngine) handle(subject string, h handler) {
	f.t.Helper()
	sub, err := f.nc.Subscribe(subject, func(m *nats.Msg) {
		f.mu.Lock()
		f.got[m.Subject] = append(f.got[m.Subject], m)
		f.mu.Unlock()
		var data []byte
		switch r := h(m); r := r.(type) {
		case nil:
			return
		case []byte:
			data = r
		default:
			var err error
			if data, err = json.Marshal(r); err != nil {
				f.t.Errorf("encode the reply on %s: %v", m.Subject, err)
				return
			}
		}
		if err := m.Respond(data); err != nil {
			f.t.Errorf("reply on %s: %v", m.Subject, err)
		}
	})
	if err != nil {
		f.t.Fatalf("subscribe %s: %v", subject, err)
	}
	f.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := f.nc.Flush(); err != nil {
		f.t.Fatalf("flush: %v", err)
	}
}

// requests is what subject received, in order.
func (f *fakeEngine) requests(subject string) []*nats.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*nats.Msg(nil), f.got[subject]...)
}

// total counts every request the engine received on any subject.
func (f *fakeEngine) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ms := range f.got {
		n += len(ms)
	}
	return n
}

// shared and engine are the subjects of a template on the pool and on the fake engine.
func (f *fakeEngine) shared(template string) string { return messages.Shared(template, f.prefix) }
func (f *fakeEngine) engine(template string) string {
	return messages.Engine(template, f.prefix, fakeEngineID)
}

// client builds a client on a connection of its own, with the test's options after short
// retry bounds (a test that wants retries sets its own).
func (f *fakeEngine) client(opts ...client.Option) *client.Backend {
	f.t.Helper()
	base := []client.Option{client.WithRetryWait(0), client.WithReconnectGrace(0), client.WithCallTimeout(10 * time.Second)}
	c, err := client.New(ctxT(f.t), natstest.Connect(f.t, f.srv), append(base, opts...)...)
	if err != nil {
		f.t.Fatalf("client.New: %v", err)
	}
	return c
}

// acquired acquires testKey through the pool, whose acquire the fake answers with a handle
// on itself.
func (f *fakeEngine) acquired(c *client.Backend) *client.Sandbox {
	f.t.Helper()
	f.handle(f.shared(messages.SubjectAcquireT), acquireReply("h1"))
	sb, err := c.Acquire(ctxT(f.t), testKey, testSpec(f.t))
	if err != nil {
		f.t.Fatalf("acquire: %v", err)
	}
	return sb.(*client.Sandbox)
}

// declarations answers a declarations request with one fixed backend.
func declarations(chunkSize int) handler {
	return func(*nats.Msg) any {
		return &messages.APIDeclarationsResponse{
			APIResponse: messages.APIResponse{Type: messages.APIDeclarationsResponseType},
			Engine:      fakeEngineID, Selected: fakeBackend,
			Backends: []messages.APIBackend{{Name: fakeBackend, Isolation: string(sandbox.IsolationContainer),
				Declarations: messages.APIDeclarations{Capabilities: []string{string(sandbox.Snapshot)}}}},
			ChunkSize: chunkSize, MaxFileBytes: fakeMaxFile,
		}
	}
}

// acquireReply hands out the sandbox handle id on the fake engine.
func acquireReply(id string) handler {
	return func(*nats.Msg) any {
		return &messages.APIAcquireResponse{APIResponse: messages.APIResponse{Type: messages.APIAcquireResponseType},
			Sandbox: &messages.APISandbox{ID: id, Engine: fakeEngineID, Kind: "k", WorkDir: "/work", Created: true, InstanceID: "i1"}}
	}
}

// reply answers every request with body.
func reply(body any) handler { return func(*nats.Msg) any { return body } }

// failWith answers every request with err in its wire form.
func failWith(err error) handler {
	return func(*nats.Msg) any { return &messages.APIResponse{Error: messages.EncodeError(err)} }
}

// response is the bare reply of a call whose response carries nothing but its type.
func response(typ string) *messages.APIResponse { return &messages.APIResponse{Type: typ} }

// decode reads a request's JSON body into a T.
func decode[T any](t *testing.T, m *nats.Msg) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(m.Data, &v); err != nil {
		t.Fatalf("decode the request on %s: %v", m.Subject, err)
	}
	return v
}

func testSpec(t *testing.T) sandbox.Spec {
	t.Helper()
	spec, err := sandbox.NewSpec("k")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
