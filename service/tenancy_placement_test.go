package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
	"github.com/mafsandbox/engine/service"
)

// placedTenantEngines starts one engine per tenancy in tens, each with placement (engine IDs
// e1, e2, …) on its own fake backend, on one server with the accounts of a multi-tenant pool
// (engine, A, B, OPS), and returns the fakes and a connection per account.
func placedTenantEngines(t *testing.T, tens ...*service.Tenancy) (fakes []*sandboxtest.Backend, conns map[string]*nats.Conn) {
	t.Helper()
	return placedTenantEnginesWith(t, nil, tens...)
}

// placedTenantEnginesWith is [placedTenantEngines], each engine also given the options extra
// returns for it (nil: none).
func placedTenantEnginesWith(t *testing.T, extra func(js jetstream.JetStream) []service.Option, tens ...*service.Tenancy) (fakes []*sandboxtest.Backend, conns map[string]*nats.Conn) {
	t.Helper()
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, "A", "B", "OPS")
	for i, ten := range tens {
		js, err := jetstream.New(natstest.ConnectAs(t, srv, "engine"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := placement.New(ctxT(t), js, fmt.Sprintf("e%d", i+1))
		if err != nil {
			t.Fatalf("placement store: %v", err)
		}
		t.Cleanup(p.Close)
		fake := newFake(t)
		router, err := sandbox.NewRouter([]sandbox.Backend{fake}, sandbox.WithMinIsolation(sandbox.IsolationNone))
		if err != nil {
			t.Fatalf("new router: %v", err)
		}
		opts := []service.Option{service.WithLogger(zaptest.NewLogger(t)), service.WithTenancy(ten), service.WithPlacement(p)}
		if extra != nil {
			opts = append(opts, extra(js)...)
		}
		svc, err := service.New(natstest.ConnectAs(t, srv, "engine"), router, opts...)
		if err != nil {
			t.Fatalf("new service with tenancy and placement: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := svc.Stop(ctx); err != nil {
				t.Errorf("stop service: %v", err)
			}
		})
		fakes = append(fakes, fake)
	}
	conns = map[string]*nats.Conn{}
	for _, acc := range []string{"engine", "A", "B", "OPS"} {
		conns[acc] = natstest.ConnectAs(t, srv, acc)
	}
	return fakes, conns
}

func engineSubject(template, engine string) string {
	return messages.Engine(template, messages.DefaultPrefix, engine)
}

func keyBody(typ, scope, handle string) map[string]any {
	b := map[string]any{"type": typ, "key": map[string]any{"scope": scope, "thread_id": "t", "agent_id": "a"}}
	if handle != "" {
		b["sandbox"] = handle
	}
	return b
}

func execBody(scope, handle string) map[string]any {
	b := keyBody("maf.sandbox.api.v1.exec_request", scope, handle)
	b["argv"], b["work_dir"], b["timeout_ms"] = []string{"true"}, ".", 10000
	return b
}

// TestTenancyWithPlacement: two engines with placement serve tenants on one server. A's
// sandbox lives on e2; A's acquire through e1 is forwarded to e2 with A's identity and served
// there, on the same sandbox. Engine e1 is given a mapping that wrongly lets B use A's scope,
// so that what B's calls through e1 meet at e2 is the identity e1 forwarded, B's: e2 refuses
// B's acquire, exec, dispose and purge of A's sandbox through either engine, and A then finds
// it untouched. A's own dispose through e1 is forwarded and done on e2.
func TestTenancyWithPlacement(t *testing.T) {
	lenient := &service.Tenancy{SameName: true, Scopes: map[string][]string{"B": {"B", "A"}}}
	fakes, conns := placedTenantEngines(t, lenient, service.DefaultTenancy())
	acquireOn := func(engine string) string { return engineSubject(messages.SubjectEngineAcquireT, engine) }

	code, out := rawCall(t, conns["A"], acquireOn("e2"), nil, acquireBody("A"))
	if code != "" {
		t.Fatalf("A acquires on e2: %v", out)
	}
	handle := out["sandbox"].(map[string]any)["id"].(string)
	code, out = rawCall(t, conns["A"], acquireOn("e1"), nil, acquireBody("A"))
	if code != "" {
		t.Fatalf("A acquires its key through e1 (forwarded to e2): %v", out)
	}
	if sb := out["sandbox"].(map[string]any); sb["engine"] != "e2" || sb["id"] != handle {
		t.Fatalf("A's acquire through e1 answered %v, want handle %s on e2", sb, handle)
	}
	if n := len(fakes[0].Acquires()); n != 0 {
		t.Fatalf("e1 created %d sandboxes, want none: it forwards", n)
	}

	exec := engineSubject(messages.SubjectExecT, "e2")
	attacks := []struct {
		name, subject string
		body          map[string]any
	}{
		{"acquire A's key through e1", acquireOn("e1"), acquireBody("A")},
		{"acquire A's key through e2", acquireOn("e2"), acquireBody("A")},
		{"acquire A's key through the pool", messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix), acquireBody("A")},
		{"exec with A's handle on e2", exec, execBody("A", handle)},
	}
	for _, a := range attacks {
		if code, out := rawCall(t, conns["B"], a.subject, nil, a.body); code != messages.CodeForbidden {
			t.Errorf("B: %s: code %q, want forbidden: %v", a.name, code, out)
		}
	}
	disposals := []struct {
		name, subject string
		body          map[string]any
	}{
		{"dispose A's key through e1", engineSubject(messages.SubjectEngineDisposeT, "e1"), keyBody("maf.sandbox.api.v1.dispose_request", "A", "")},
		{"purge A's scope through e1", engineSubject(messages.SubjectEngineDisposeScopeT, "e1"), keyBody("maf.sandbox.api.v1.dispose_scope_request", "A", "")},
	}
	for _, d := range disposals {
		code, out := rawCall(t, conns["B"], d.subject, nil, d.body)
		undisposed, _ := out["undisposed"].(map[string]any)
		if code == "" && (undisposed == nil || undisposed["code"] != string(sandbox.DisposalRefused)) {
			t.Errorf("B: %s: served, want refused by e2: %v", d.name, out)
		}
	}
	if code, out := rawCall(t, conns["A"], exec, nil, execBody("A", handle)); code != "" {
		t.Fatalf("A execs on its sandbox after B's attempts: %v", out)
	}
	if live := fakes[1].Live(); len(live) != 1 {
		t.Fatalf("e2 holds %v after B's attempts, want A's sandbox", live)
	}

	code, out = rawCall(t, conns["A"], engineSubject(messages.SubjectEngineDisposeT, "e1"), nil, keyBody("maf.sandbox.api.v1.dispose_request", "A", ""))
	if code != "" || out["undisposed"] != nil {
		t.Fatalf("A disposes its key through e1 (forwarded to e2): %v", out)
	}
	if live := fakes[1].Live(); len(live) != 0 {
		t.Fatalf("e2 still holds %v after A's dispose through e1", live)
	}
}

// TestTenancyForwardHeaderCannotBeForged: the identity header a forward carries is believed
// only on a request that crossed no import. A tenant that sets it (as B, marked forwarded)
// through its import, on the pool's subject and on each engine's own, is served as itself,
// which the server's Nats-Request-Info names: refused B's key, served its own. From inside
// the engine's account, the trusted place forwards come from, the header is believed; without
// the forwarded mark, or with two identities, it is not.
func TestTenancyForwardHeaderCannotBeForged(t *testing.T) {
	_, conns := placedTenantEngines(t, service.DefaultTenancy(), service.DefaultTenancy())
	forged := func(ids ...string) nats.Header {
		h := nats.Header{}
		h.Set(service.ForwardedHeader, "e9")
		for _, id := range ids {
			h.Add(service.ForwardedIdentityHeader, id)
		}
		return h
	}
	asB := `{"acc":"B","user":"B"}`
	cases := []struct {
		name, conn, subject, scope string
		hdr                        nats.Header
		want                       string
	}{
		{"A as B on the pool's subject", "A", messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix), "B", forged(asB), messages.CodeForbidden},
		{"A as B on e1's subject", "A", engineSubject(messages.SubjectEngineAcquireT, "e1"), "B", forged(asB), messages.CodeForbidden},
		{"A as B on e2's subject", "A", engineSubject(messages.SubjectEngineAcquireT, "e2"), "B", forged(asB), messages.CodeForbidden},
		{"A as B, own scope: served as A", "A", engineSubject(messages.SubjectEngineAcquireT, "e1"), "A", forged(asB), ""},
		{"engine account forwards as B", "engine", engineSubject(messages.SubjectEngineAcquireT, "e1"), "B", forged(asB), ""},
		{"engine account forwards as B, B's identity used", "engine", engineSubject(messages.SubjectEngineAcquireT, "e1"), "A", forged(asB), messages.CodeForbidden},
		{"identity without the forwarded mark", "engine", engineSubject(messages.SubjectEngineAcquireT, "e1"), "B",
			nats.Header{service.ForwardedIdentityHeader: []string{asB}}, messages.CodeForbidden},
		{"two forwarded identities", "engine", engineSubject(messages.SubjectEngineAcquireT, "e1"), "B", forged(asB, asB), messages.CodeForbidden},
		{"a forwarded identity naming no account", "engine", engineSubject(messages.SubjectEngineAcquireT, "e1"), "B", forged(`{"user":"B"}`), messages.CodeForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if code, out := rawCall(t, conns[tc.conn], tc.subject, tc.hdr, acquireBody(tc.scope)); code != tc.want {
				t.Fatalf("code %q, want %q: %v", code, tc.want, out)
			}
		})
	}
}

// TestTenancyWithMembers: with members too, a cold acquire that reaches the loaded engine e1
// through the pool is handed to the lighter e2 (placement.Owner.Lighter) with the caller's
// identity: a spy in the engine's account sees the forward on e2's subject carry A's, e2
// creates A's sandbox, A uses it there and B is refused it.
func TestTenancyWithMembers(t *testing.T) {
	members := func(js jetstream.JetStream) []service.Option {
		m, err := placement.NewMembers(ctxT(t), js, placement.WithLease(600*time.Millisecond))
		if err != nil {
			t.Fatalf("members bucket: %v", err)
		}
		return []service.Option{service.WithMembers(m, "daemon-1")}
	}
	fakes, conns := placedTenantEnginesWith(t, members, service.DefaultTenancy(), service.DefaultTenancy())
	const held = 10
	for i := range held { // on e1's own subject: never balanced
		body := acquireBody("A")
		body["key"].(map[string]any)["thread_id"] = fmt.Sprintf("held-%d", i)
		if code, out := rawCall(t, conns["A"], engineSubject(messages.SubjectEngineAcquireT, "e1"), nil, body); code != "" {
			t.Fatalf("A loads e1: %v", out)
		}
	}
	time.Sleep(time.Second) // e1 has announced its load and read e2's since (every 200 ms)

	spy, err := conns["engine"].SubscribeSync(engineSubject(messages.SubjectEngineAcquireT, "e2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := conns["engine"].Flush(); err != nil {
		t.Fatal(err)
	}
	pool := messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix)
	// The pool's queue group picks e1 or e2 at random, until e1 has handed one over: 32 tries
	// leave a chance of 2^-32 that e1 never gets one (with 8 it was 1 in 256).
	for i := range 32 {
		body := acquireBody("A")
		body["key"].(map[string]any)["thread_id"] = fmt.Sprintf("cold-%d", i)
		code, out := rawCall(t, conns["A"], pool, nil, body)
		if code != "" {
			t.Fatalf("A's cold acquire through the pool: %v", out)
		}
		sb := out["sandbox"].(map[string]any)
		if sb["engine"] != "e2" {
			t.Fatalf("A's cold acquire served on %v, want the lighter e2", sb["engine"])
		}
		m, err := spy.NextMsg(200 * time.Millisecond)
		if err != nil {
			continue // e2 got it from the pool itself
		}
		if by, id := m.Header.Get(service.ForwardedHeader), m.Header.Get(service.ForwardedIdentityHeader); by != "e1" || !strings.Contains(id, `"acc":"A"`) {
			t.Fatalf("the forward to e2 carries %s=%q, %s=%q; want e1 and A's identity", service.ForwardedHeader, by, service.ForwardedIdentityHeader, id)
		}
		exec, execReq := engineSubject(messages.SubjectExecT, "e2"), execBody("A", sb["id"].(string))
		execReq["key"] = body["key"]
		if code, out := rawCall(t, conns["A"], exec, nil, execReq); code != "" {
			t.Fatalf("A execs on the sandbox e1 handed to e2: %v", out)
		}
		if code, out := rawCall(t, conns["B"], exec, nil, execReq); code != messages.CodeForbidden {
			t.Fatalf("B execs on A's handle: code %q, want forbidden: %v", code, out)
		}
		if code, out := rawCall(t, conns["B"], pool, nil, body); code != messages.CodeForbidden {
			t.Fatalf("B acquires A's key through the pool: code %q, want forbidden: %v", code, out)
		}
		if n := len(fakes[0].Acquires()); n != held {
			t.Fatalf("e1 served %d acquires, want only the %d it was loaded with", n, held)
		}
		return
	}
	t.Fatal("in 32 cold acquires through the pool e1 handed none to e2")
}
