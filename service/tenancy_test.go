package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// tenantsEngine serves the fake on a server with the accounts of a multi-tenant pool (engine,
// A, B, OPS), with the tenancy t, and returns a connection per account.
func tenantsEngine(t *testing.T, ten *service.Tenancy) (svc *service.Service, conns map[string]*nats.Conn) {
	t.Helper()
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, "A", "B", "OPS")
	router, err := sandbox.NewRouter([]sandbox.Backend{newFake(t)}, sandbox.WithMinIsolation(sandbox.IsolationNone))
	if err != nil {
		t.Fatalf("new router: %v", err)
	}
	svc, err = service.New(natstest.ConnectAs(t, srv, "engine"), router,
		service.WithLogger(zaptest.NewLogger(t)), service.WithTenancy(ten))
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop service: %v", err)
		}
	})
	conns = map[string]*nats.Conn{}
	for _, acc := range []string{"engine", "A", "B", "OPS"} {
		conns[acc] = natstest.ConnectAs(t, srv, acc)
	}
	return svc, conns
}

// rawCall sends body to subject with the headers given and returns the reply's error code
// ("" for success) and its body.
func rawCall(t *testing.T, nc *nats.Conn, subject string, hdr nats.Header, body map[string]any) (string, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: subject, Header: hdr, Data: b}
	reply, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var out map[string]any
	if err := json.Unmarshal(reply.Data, &out); err != nil {
		t.Fatalf("reply %s: %v", reply.Data, err)
	}
	if e, ok := out["error"].(map[string]any); ok {
		code, _ := e["code"].(string)
		return code, out
	}
	return "", out
}

func acquireBody(scope string) map[string]any {
	return map[string]any{"type": "maf.sandbox.api.v1.acquire_request",
		"key":  map[string]any{"scope": scope, "thread_id": "t", "agent_id": "a"},
		"spec": map[string]any{"kind": "shell", "image": "fake", "requires": []string{"exec"}}}
}

// TestTenancyIdentityComesFromTheServer shows what the NATS server does with the identity
// header: a tenant that sets Nats-Request-Info itself (as another account, twice, in another
// case) still reaches the engine as itself, because the server replaces the header on the
// import crossing; a request from inside the engine's account carries none and is refused.
func TestTenancyIdentityComesFromTheServer(t *testing.T) {
	_, conns := tenantsEngine(t, nil)
	acquire := messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix)
	forged := func(pairs ...string) nats.Header {
		h := nats.Header{}
		for i := 0; i < len(pairs); i += 2 {
			h[pairs[i]] = append(h[pairs[i]], pairs[i+1])
		}
		return h
	}
	asB := `{"acc":"B","user":"B"}`
	cases := []struct {
		name     string
		conn     string
		hdr      nats.Header
		scope    string
		wantCode string
	}{
		{"A acquires its own scope", "A", nil, "A", ""},
		{"A acquires B's scope", "A", nil, "B", messages.CodeForbidden},
		{"A forges B's identity in the header", "A", forged(messages.RequestInfoHeader, asB), "B", messages.CodeForbidden},
		{"A forges B's identity twice", "A", forged(messages.RequestInfoHeader, asB, messages.RequestInfoHeader, asB), "B", messages.CodeForbidden},
		{"A forges it in lower case", "A", forged("nats-request-info", asB), "B", messages.CodeForbidden},
		{"A forged header, own scope: served as A", "A", forged(messages.RequestInfoHeader, asB), "A", ""},
		{"no import crossed: no identity", "engine", nil, "A", messages.CodeForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := rawCall(t, conns[tc.conn], acquire, tc.hdr, acquireBody(tc.scope))
			if code != tc.wantCode {
				t.Fatalf("code %q, want %q: %v", code, tc.wantCode, out)
			}
		})
	}
}

// TestTenancyForbiddenIsTypedInTheClient: the Go client rebuilds a forbidden reply as a
// *messages.ForbiddenError in the refused family.
func TestTenancyForbiddenIsTypedInTheClient(t *testing.T) {
	_, conns := tenantsEngine(t, nil)
	c, err := client.New(ctxT(t), conns["A"])
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	_, err = c.Acquire(ctxT(t), sandbox.Key{Scope: "B", ThreadID: "t", AgentID: "a"}, testSpec(t))
	var fe *messages.ForbiddenError
	if !errors.As(err, &fe) || !errors.Is(err, sandbox.ErrRefused) {
		t.Fatalf("acquire of B's scope by A: %v, want a *messages.ForbiddenError in the refused family", err)
	}
	sb, err := c.Acquire(ctxT(t), sandbox.Key{Scope: "A", ThreadID: "t", AgentID: "a"}, testSpec(t))
	if err != nil {
		t.Fatalf("acquire of A's own scope: %v", err)
	}
	if _, err := sb.Exec(ctxT(t), sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatalf("exec in A's own sandbox: %v", err)
	}
}

// TestTenancyMapping: the mapping from a file's fields. An account mapped to no scope is
// refused everything that names a scope; an account mapped elsewhere uses only those scopes.
func TestTenancyMapping(t *testing.T) {
	_, conns := tenantsEngine(t, &service.Tenancy{SameName: true, Scopes: map[string][]string{
		"A": {}, "B": {"b-1", "b-2"}}})
	acquire := messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix)
	cases := []struct {
		conn, scope, want string
	}{
		{"A", "A", messages.CodeForbidden}, // mapped to nothing: refuses, never falls back to same-name
		{"B", "B", messages.CodeForbidden}, // mapped: its own name is not among its scopes
		{"B", "b-2", ""},                   // mapped
		{"OPS", "OPS", ""},                 // not mapped: same-name
		{"OPS", "b-1", messages.CodeForbidden},
	}
	for _, tc := range cases {
		code, out := rawCall(t, conns[tc.conn], acquire, nil, acquireBody(tc.scope))
		if code != tc.want {
			t.Errorf("%s acquires %s: code %q, want %q: %v", tc.conn, tc.scope, code, tc.want, out)
		}
	}
}

// TestTenancyHandleIsBoundToItsAcquirer: two accounts that may both use a scope do not share
// handles: a handle answers only the accounts that acquired it, even under the right key.
func TestTenancyHandleIsBoundToItsAcquirer(t *testing.T) {
	_, conns := tenantsEngine(t, &service.Tenancy{Scopes: map[string][]string{"A": {"shared"}, "B": {"shared"}}})
	acquire := messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix)
	code, out := rawCall(t, conns["A"], acquire, nil, acquireBody("shared"))
	if code != "" {
		t.Fatalf("A acquires: %v", out)
	}
	sb := out["sandbox"].(map[string]any)
	handle, engineID := sb["id"].(string), sb["engine"].(string)
	exec := messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, engineID)
	body := map[string]any{"type": "maf.sandbox.api.v1.exec_request", "key": map[string]any{"scope": "shared", "thread_id": "t", "agent_id": "a"},
		"sandbox": handle, "argv": []string{"true"}, "work_dir": ".", "timeout_ms": 10000}
	if code, out := rawCall(t, conns["B"], exec, nil, body); code != messages.CodeForbidden {
		t.Fatalf("B execs with A's handle under the shared key: code %q, want forbidden: %v", code, out)
	}
	if code, out := rawCall(t, conns["A"], exec, nil, body); code != "" {
		t.Fatalf("A execs with its handle: %v", out)
	}
	// B acquiring the same key itself is bound to the same sandbox, and may use it.
	if code, out := rawCall(t, conns["B"], acquire, nil, acquireBody("shared")); code != "" || out["sandbox"].(map[string]any)["id"] != handle {
		t.Fatalf("B acquires the shared key: %v", out)
	}
	if code, out := rawCall(t, conns["B"], exec, nil, body); code != "" {
		t.Fatalf("B execs after its own acquire: %v", out)
	}
}

// TestTenancyToolImport: the deployment's tool route. A request the engine's account sends to
// maf.sandbox.tools.A.… (as the engine sends a host-tool call) reaches A's responder through
// A's export and the engine's import, and B, subscribed to the same subject in its own
// account, sees nothing of it.
func TestTenancyToolImport(t *testing.T) {
	_, conns := tenantsEngine(t, nil)
	subject := service.DefaultToolPrefix + ".A.search"
	if _, err := conns["A"].Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(`{"value":"from A"}`)) }); err != nil {
		t.Fatal(err)
	}
	spy, err := conns["B"].SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{conns["A"], conns["B"]} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := conns["engine"].Request(subject, []byte(`{"tool":"search"}`), 5*time.Second)
	if err != nil || string(reply.Data) != `{"value":"from A"}` {
		t.Fatalf("the engine's request to A's tool: %v, %v", reply, err)
	}
	if m, err := spy.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("B saw A's tool call: %s", m.Data)
	}
	if _, err := conns["engine"].Request(service.DefaultToolPrefix+".B.search", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("B's tool subject with no responder in B: %v, want no responders", err)
	}
}

// TestTenancyUserMapping: a user entry decides for that user in place of its account's (the
// import has share: true, so the server names the user); the account's other users keep the
// account's scopes.
func TestTenancyUserMapping(t *testing.T) {
	_, conns := tenantsEngine(t, &service.Tenancy{SameName: true, Users: map[string]map[string][]string{
		"A": {"A": {"a-narrow"}}, "B": {"someone-else": {"x"}}}})
	acquire := messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix)
	cases := []struct {
		conn, scope, want string
	}{
		{"A", "a-narrow", ""},
		{"A", "A", messages.CodeForbidden}, // the user's entry replaces the account's same-name scope
		{"B", "B", ""},                     // B's user is not listed: the account's rule
		{"B", "x", messages.CodeForbidden},
	}
	for _, tc := range cases {
		code, out := rawCall(t, conns[tc.conn], acquire, nil, acquireBody(tc.scope))
		if code != tc.want {
			t.Errorf("%s acquires %s: code %q, want %q: %v", tc.conn, tc.scope, code, tc.want, out)
		}
	}
}
