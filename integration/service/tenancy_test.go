package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// tenantPool is one engine on the real Docker backend, served with tenancy on a server with
// the accounts of docs/operations.md#tenancy: two tenants and an operator.
type tenantPool struct {
	a, b, ops string // account names, which are also the tenants' scopes (same-name default)
	conns     map[string]*nats.Conn
	engine    string
	ev        *events.Events // the audit's events, when on
	evNC      *nats.Conn     // the engine account's connection the events publish on
}

func startTenantPool(t *testing.T) *tenantPool { return startTenantPoolWith(t, false) }

// startTenantPoolWith is [startTenantPool], with the engine's audit stream on when audit.
func startTenantPoolWith(t *testing.T, audit bool, extra ...service.Option) *tenantPool {
	t.Helper()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	p := &tenantPool{a: "it-ta-" + hex.EncodeToString(suffix), b: "it-tb-" + hex.EncodeToString(suffix),
		ops: "it-ops-" + hex.EncodeToString(suffix), conns: map[string]*nats.Conn{}}
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, p.a, p.b, p.ops)
	b := itest.NewBackend(t)
	opts := []service.Option{service.WithTenancy(&service.Tenancy{SameName: true, Operators: []string{p.ops}})}
	if audit {
		p.evNC = natstest.ConnectAs(t, srv, "engine")
		ev, err := events.New(itest.Context(t), p.evNC)
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = ev.Close(ctx)
		})
		p.ev = ev
	}
	var obs sandbox.Observer
	if p.ev != nil {
		obs = p.ev
	}
	svc := itest.ServeObservedOn(t, natstest.ConnectAs(t, srv, "engine"), b, obs, append(opts, extra...)...)
	p.engine = svc.EngineID()
	for _, acc := range []string{p.a, p.b, p.ops} {
		p.conns[acc] = natstest.ConnectAs(t, srv, acc)
	}
	for _, scope := range []string{p.a, p.b} {
		key := sandbox.Key{Scope: scope, ThreadID: "t", AgentID: "a"}
		t.Cleanup(func() { // on the backend itself, whatever the engine was told
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
				t.Errorf("dispose %s: %v", key, f)
			}
		})
	}
	return p
}

// remote is a Go client of the pool as account acc.
func (p *tenantPool) remote(t *testing.T, acc string) *client.Backend {
	t.Helper()
	c, err := client.New(itest.Context(t), p.conns[acc])
	if err != nil {
		t.Fatalf("new client as %s: %v", acc, err)
	}
	return c
}

// raw sends req (a messages request, its type set) as acc to the engine's subject of op (or
// the shared one when shared) with hdr, and returns the reply's error code, "" on success.
func (p *tenantPool) raw(t *testing.T, acc, op string, shared bool, hdr nats.Header, req any) (string, []byte) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	subject := messages.DefaultPrefix + ".v1.engine." + p.engine + "." + op
	if shared {
		subject = messages.DefaultPrefix + ".v1." + op
	}
	reply, err := p.conns[acc].RequestMsg(&nats.Msg{Subject: subject, Header: hdr, Data: body}, 30*time.Second)
	if err != nil {
		t.Fatalf("%s as %s: %v", subject, acc, err)
	}
	var r messages.APIResponse
	if err := json.Unmarshal(reply.Data, &r); err != nil {
		t.Fatalf("reply %s: %v", reply.Data, err)
	}
	if r.Error != nil {
		return r.Error.Code, reply.Data
	}
	return "", reply.Data
}

func env(typ string, scope, handle string) messages.APIEnvelope {
	return messages.APIEnvelope{Type: typ, Key: &messages.APIKey{Scope: scope, ThreadID: "t", AgentID: "a"}, Sandbox: handle}
}

// TestTenancyAttacks: tenant A tries every way into tenant B's sandbox through a shared pool
// on the real Docker engine and a real nats-server with accounts; each is refused (forbidden)
// or sees nothing, and B then finds its sandbox untouched.
func TestTenancyAttacks(t *testing.T) {
	p := startTenantPool(t)
	ctx := itest.Context(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	keyA := sandbox.Key{Scope: p.a, ThreadID: "t", AgentID: "a"}
	keyB := sandbox.Key{Scope: p.b, ThreadID: "t", AgentID: "a"}
	sbB, err := p.remote(t, p.b).Acquire(ctx, keyB, spec)
	if err != nil {
		t.Fatalf("B acquires its own key: %v", err)
	}
	if err := sbB.WriteFile(ctx, "secret", []byte("b-data"), "."); err != nil {
		t.Fatalf("B writes: %v", err)
	}
	hB := sbB.(*client.Sandbox).Handle()
	sbA, err := p.remote(t, p.a).Acquire(ctx, keyA, spec)
	if err != nil {
		t.Fatalf("A acquires its own key: %v", err)
	}
	hA := sbA.(*client.Sandbox).Handle()

	forgedB := nats.Header{messages.RequestInfoHeader: []string{`{"acc":"` + p.b + `","user":"` + p.b + `"}`}}
	execB := &messages.APIExecRequest{APIEnvelope: env(messages.APIExecRequestType, p.b, hB), Argv: []string{"sh", "-c", "echo pwned > secret"}, WorkDir: ".", TimeoutMS: 10000}
	readB := &messages.APIReadFileRequest{APIEnvelope: env(messages.APIReadFileRequestType, p.b, hB), Path: "secret", WorkDir: ".", MaxBytes: 1024}
	readBUnderA := &messages.APIReadFileRequest{APIEnvelope: env(messages.APIReadFileRequestType, p.a, hB), Path: "secret", WorkDir: ".", MaxBytes: 1024}
	guess := &messages.APIReadFileRequest{APIEnvelope: env(messages.APIReadFileRequestType, p.a, "guessed-handle-0001"), Path: "secret", WorkDir: ".", MaxBytes: 1024}
	cases := []struct {
		name   string
		op     string
		shared bool
		hdr    nats.Header
		req    any
		want   string
	}{
		{"A acquires B's key", "acquire", true, nil,
			&messages.APIAcquireRequest{APIEnvelope: env(messages.APIAcquireRequestType, p.b, ""), Spec: messages.APISpec{Kind: "shell", Image: spec.Image, Requires: []string{"exec"}}}, messages.CodeForbidden},
		{"A execs with B's handle and key", "exec", false, nil, execB, messages.CodeForbidden},
		{"A reads with B's handle and key", "read_file", false, nil, readB, messages.CodeForbidden},
		{"A reads with B's handle under its own key", "read_file", false, nil, readBUnderA, messages.CodeForbidden},
		{"A guesses a handle", "read_file", false, nil, guess, messages.CodeUnknownSandbox},
		{"A disposes B's key", "dispose", true, nil, &messages.APIDisposeRequest{APIEnvelope: env(messages.APIDisposeRequestType, p.b, "")}, messages.CodeForbidden},
		{"A purges B's scope", "dispose_scope", true, nil, &messages.APIDisposeScopeRequest{APIEnvelope: env(messages.APIDisposeScopeRequestType, p.b, "")}, messages.CodeForbidden},
		// Ages of ten years: a broken check still removes nothing of anyone's on the shared daemon.
		{"A reaps every scope", "reap", true, nil, &messages.APIReapRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIReapRequestType}, OlderThanMS: 10 * 365 * 24 * 3600 * 1000}, messages.CodeForbidden},
		{"A reaps B's scope", "reap", true, nil, &messages.APIReapRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIReapRequestType}, OlderThanMS: 10 * 365 * 24 * 3600 * 1000, Scope: p.b}, messages.CodeForbidden},
		{"A lists B's sandboxes", "list_sandboxes", false, nil, &messages.APIListSandboxesRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIListSandboxesRequestType}, Scope: p.b}, messages.CodeForbidden},
		{"A calls B's host-tool subject", "run_program", false, nil,
			&messages.APIRunProgramRequest{APIEnvelope: env(messages.APIRunProgramRequestType, p.a, hA), Source: "print(1)", TimeoutMS: 10000,
				Tools: []messages.APIHostTool{{Name: "search", Subject: service.DefaultToolPrefix + "." + p.b + ".search", AnyArguments: true}}}, messages.CodeForbidden},
		{"A streams its exec to B's stream subjects", "exec", false, nil,
			&messages.APIExecRequest{APIEnvelope: env(messages.APIExecRequestType, p.a, hA), Argv: []string{"true"}, WorkDir: ".", TimeoutMS: 10000,
				StreamTo: service.DefaultStreamPrefix + "." + p.b + ".x"}, messages.CodeForbidden},
		{"A forges B's identity in the header", "exec", false, forgedB, execB, messages.CodeForbidden},
		{"A forges B's identity in the body", "exec", false, nil,
			map[string]any{"type": messages.APIExecRequestType, "key": map[string]string{"scope": p.b, "thread_id": "t", "agent_id": "a"},
				"sandbox": hB, "acc": p.b, "argv": []string{"true"}, "work_dir": ".", "timeout_ms": 10000}, messages.CodeForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := p.raw(t, p.a, tc.op, tc.shared, tc.hdr, tc.req)
			if code != tc.want {
				t.Errorf("code %q, want %q: %s", code, tc.want, body)
			}
		})
	}

	// A's own inventory: its sandbox, none of B's.
	code, body := p.raw(t, p.a, "list_sandboxes", false, nil, &messages.APIListSandboxesRequest{
		APIEnvelope: messages.APIEnvelope{Type: messages.APIListSandboxesRequestType}, Scope: p.a})
	var own messages.APIListSandboxesResponse
	if err := json.Unmarshal(body, &own); code != "" || err != nil || own.Total != 1 || own.Sandboxes[0].ID != hA {
		t.Fatalf("A lists its own scope: code %q, %s (%v); want its one sandbox", code, body, err)
	}
	// A list naming no scope is A's own scopes' alone: B's sandbox, on the same engine, is not in it.
	code, body = p.raw(t, p.a, "list_sandboxes", false, nil, &messages.APIListSandboxesRequest{
		APIEnvelope: messages.APIEnvelope{Type: messages.APIListSandboxesRequestType}})
	var mine messages.APIListSandboxesResponse
	if err := json.Unmarshal(body, &mine); code != "" || err != nil || mine.Total != 1 || mine.Sandboxes[0].ID != hA {
		t.Fatalf("A lists with no scope: code %q, %s (%v); want its one sandbox and none of B's", code, body, err)
	}

	// B's sandbox is untouched: same handle, same file.
	got, err := sbB.ReadFile(ctx, "secret", ".", 1024)
	if err != nil || string(got) != "b-data" {
		t.Fatalf("B reads its file after the attacks: %q, %v; want b-data", got, err)
	}
	res, err := sbB.Exec(ctx, sandbox.Argv("cat", "secret"), ".", time.Minute)
	if err != nil || res.Stdout() != "b-data" {
		t.Fatalf("B execs after the attacks: %+v, %v", res, err)
	}
}

// TestTenancyOperatorAndFlows: the operator reaps and purges across tenants; a tenant's own
// calls work through the import, chunked transfers and a streaming exec to its own stream
// namespace included.
func TestTenancyOperatorAndFlows(t *testing.T) {
	p := startTenantPool(t)
	ctx := itest.Context(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	keyA := sandbox.Key{Scope: p.a, ThreadID: "t", AgentID: "a"}
	keyB := sandbox.Key{Scope: p.b, ThreadID: "t", AgentID: "a"}
	sbA, err := p.remote(t, p.a).Acquire(ctx, keyA, spec)
	if err != nil {
		t.Fatalf("A acquires: %v", err)
	}
	sbB, err := p.remote(t, p.b).Acquire(ctx, keyB, spec)
	if err != nil {
		t.Fatalf("B acquires: %v", err)
	}

	// A chunked round trip (upload_chunk, download_chunk) through the import: 3 MiB.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*64*1024)
	if err := sbA.WriteFile(ctx, "big", big, "."); err != nil {
		t.Fatalf("A writes 3 MiB: %v", err)
	}
	back, err := sbA.ReadFile(ctx, "big", ".", int64(len(big)))
	if err != nil || !bytes.Equal(back, big) {
		t.Fatalf("A reads 3 MiB back: %d bytes, %v", len(back), err)
	}

	// A streaming exec to A's own stream namespace, which the engine exports to A: raw, and
	// through the Go client with WithStreamPrefix.
	streamTo := service.DefaultStreamPrefix + "." + p.a + ".exec1"
	chunks, err := p.conns[p.a].SubscribeSync(streamTo)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.conns[p.a].Flush(); err != nil {
		t.Fatal(err)
	}
	hA := sbA.(*client.Sandbox).Handle()
	code, body := p.raw(t, p.a, "exec", false, nil, &messages.APIExecRequest{APIEnvelope: env(messages.APIExecRequestType, p.a, hA),
		Argv: []string{"echo", "streamed"}, WorkDir: ".", TimeoutMS: 10000, StreamTo: streamTo})
	if code != "" {
		t.Fatalf("A's streaming exec: %s", body)
	}
	m, err := chunks.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("A's chunk on %s: %v", streamTo, err)
	}
	var chunk messages.APIExecChunk
	if err := json.Unmarshal(m.Data, &chunk); err != nil || !bytes.Contains(chunk.Data, []byte("streamed")) {
		t.Fatalf("chunk %s: %v", m.Data, err)
	}
	streaming, err := client.New(ctx, p.conns[p.a], client.WithStreamPrefix(service.DefaultStreamPrefix+"."+p.a))
	if err != nil {
		t.Fatal(err)
	}
	sbS, err := streaming.Acquire(ctx, keyA, spec)
	if err != nil {
		t.Fatalf("A acquires with the streaming client: %v", err)
	}
	var got bytes.Buffer
	if _, err := sbS.(*client.Sandbox).ExecStream(ctx, sandbox.Argv("echo", "via client"), ".", time.Minute,
		func(_ string, b []byte) { got.Write(b) }); err != nil || got.String() != "via client\n" {
		t.Fatalf("A's ExecStream with WithStreamPrefix: %q, %v", got.String(), err)
	}

	// The operator may not use a tenant's sandbox, but reaps B's scope and purges A's.
	code, _ = p.raw(t, p.ops, "exec", false, nil, &messages.APIExecRequest{APIEnvelope: env(messages.APIExecRequestType, p.a, hA), Argv: []string{"true"}, WorkDir: ".", TimeoutMS: 10000})
	if code != messages.CodeForbidden {
		t.Errorf("operator execs in A's sandbox: code %q, want forbidden", code)
	}
	code, body = p.raw(t, p.ops, "reap", true, nil, &messages.APIReapRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIReapRequestType}, OlderThanMS: 1, Scope: p.b})
	var reaped messages.APIReapResponse
	if err := json.Unmarshal(body, &reaped); code != "" || err != nil || reaped.Disposed != 1 {
		t.Fatalf("operator reaps B's scope: %s", body)
	}
	if _, err := sbB.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("B's exec after the operator's reap: %v, want gone", err)
	}
	code, body = p.raw(t, p.ops, "dispose_scope", true, nil, &messages.APIDisposeScopeRequest{APIEnvelope: env(messages.APIDisposeScopeRequestType, p.a, "")})
	var purged messages.APIDisposeScopeResponse
	if err := json.Unmarshal(body, &purged); code != "" || err != nil || purged.Disposed != 1 {
		t.Fatalf("operator purges A's scope: %s", body)
	}
	if _, err := sbA.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err == nil {
		t.Fatalf("A's exec after the operator's purge succeeded")
	}
}

// TestTenancyEvents: each tenant's account imports the audit events of its own scope, which the
// engine's account exports to it alone; a tenant subscribed to every event subject it can
// name sees its own and nothing of the other's.
func TestTenancyEvents(t *testing.T) {
	p := startTenantPoolWith(t, true)
	ctx := itest.Context(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec))
	seen := map[string]*nats.Subscription{}
	for _, acc := range []string{p.a, p.b} {
		sub, err := p.conns[acc].SubscribeSync(events.DefaultSubjectPrefix + ".>")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.conns[acc].Flush(); err != nil {
			t.Fatal(err)
		}
		seen[acc] = sub
	}
	// A's refused attempt on B's key must not land in B's audit subjects.
	if _, err := p.remote(t, p.a).Acquire(ctx, sandbox.Key{Scope: p.b, ThreadID: "t", AgentID: "a"}, spec); !errors.Is(err, sandbox.ErrRefused) {
		t.Fatalf("A acquires B's key: %v, want forbidden", err)
	}
	for _, acc := range []string{p.a, p.b} {
		sb, err := p.remote(t, acc).Acquire(ctx, sandbox.Key{Scope: acc, ThreadID: "t", AgentID: "a"}, spec)
		if err != nil {
			t.Fatalf("%s acquires: %v", acc, err)
		}
		if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
			t.Fatalf("%s execs: %v", acc, err)
		}
	}
	for acc, other := range map[string]string{p.a: p.b, p.b: p.a} {
		own := 0
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			m, err := seen[acc].NextMsg(time.Until(deadline))
			if err != nil {
				break
			}
			if strings.Contains(m.Subject, "."+other+".") || bytes.Contains(m.Data, []byte(other)) {
				t.Errorf("%s saw an event of %s: %s", acc, other, m.Subject)
			}
			if strings.HasPrefix(m.Subject, events.DefaultSubjectPrefix+".audit."+acc+".") {
				own++
			}
			if own >= 2 { // sandbox.acquired and the exec; then wait a moment for strays
				deadline = time.Now().Add(time.Second)
			}
		}
		if own < 2 {
			t.Errorf("%s saw %d of its own audit events, want at least 2 (acquire, exec)", acc, own)
		}
	}
}

// TestTenancyAuditIDs: tenant A cannot occupy tenant B's audit IDs. A knows (or guesses) the
// request ID B's host will send and sends it first: on a dispose of B's key (refused,
// forbidden) and on acts of its own (acquire, exec, write, dispose). B's acts with that
// request ID all land in the audit stream, each under an ID of its own, carrying B's account.
func TestTenancyAuditIDs(t *testing.T) {
	p := startTenantPoolWith(t, true)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn))
	const shared = "req-guessed-by-a"
	keyA := sandbox.Key{Scope: p.a, ThreadID: "t", AgentID: "a"}
	keyB := sandbox.Key{Scope: p.b, ThreadID: "t", AgentID: "a"}
	acts := func(acc string, key sandbox.Key) {
		t.Helper()
		c := p.remote(t, acc)
		ctx := client.ContextWithRequestID(itest.Context(t), shared)
		sb, err := c.Acquire(ctx, key, spec)
		if err != nil {
			t.Fatalf("%s acquires: %v", acc, err)
		}
		if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
			t.Fatalf("%s execs: %v", acc, err)
		}
		if err := sb.WriteFile(ctx, "f.txt", []byte(acc), "."); err != nil {
			t.Fatalf("%s writes: %v", acc, err)
		}
		if f := c.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Fatalf("%s disposes: %v", acc, f)
		}
	}
	attacker := client.ContextWithRequestID(itest.Context(t), shared)
	if f := p.remote(t, p.a).Dispose(attacker, keyB, sandbox.DisposeOptions{}); f == nil {
		t.Fatal("A disposed B's key")
	}
	acts(p.a, keyA)
	acts(p.b, keyB)

	waitUntil(t, "every audit event handed to the stream", func() bool {
		st := p.ev.AuditStats()
		return st.Pending == 0 && st.Delivered >= 10 // engine.started, A's refusal and four acts, B's four
	})
	got := fetchAllNow(t, p.evNC, events.DefaultSubjectPrefix+".audit.>")
	ids := map[string]string{}
	ofB := map[string]int{}
	for _, m := range got {
		var a events.AuditEvent
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatal(err)
		}
		if prev, dup := ids[a.ID]; dup {
			t.Errorf("two events share the ID %s: %s and %s", a.ID, prev, a.Type)
		}
		ids[a.ID] = a.Account + " " + a.Type
		if a.Key != nil && a.Key.Scope == p.b {
			if a.Account != p.b {
				t.Errorf("an event of B's scope carries account %q: %s", a.Account, m.Data())
			}
			ofB[a.Type]++
		}
	}
	want := map[string]int{events.AuditSandboxAcquired: 1, events.AuditExecFinished: 1, events.AuditFileWritten: 1, events.AuditSandboxDisposed: 1}
	if !maps.Equal(ofB, want) {
		t.Fatalf("B's events in the stream by type %v, want %v: A's calls with B's request ID suppressed them", ofB, want)
	}
}

// TestTenancyAccountBound: tenant A floods the engine with long commands and cannot starve
// tenant B. With 6 calls at once for the engine and 2 per account, A sends 6 execs that wait
// for a file: 2 run and 4 are refused at once, busy (a *messages.BusyError through the Go
// client), for A alone. While A's 2 still run, B's health, acquire and exec are served, A's
// own health answers too, and A's next exec is busy again. Once the file appears A's 2
// finish and A is served again.
func TestTenancyAccountBound(t *testing.T) {
	const perAccount, flood = 2, 6
	p := startTenantPoolWith(t, false, service.WithMaxInFlight(flood), service.WithMaxInFlightPerAccount(perAccount))
	ctx := itest.Context(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec))
	noRetry := func(acc string) *client.Backend {
		c, err := client.New(ctx, p.conns[acc], client.WithRetryWait(0))
		if err != nil {
			t.Fatalf("client as %s: %v", acc, err)
		}
		return c
	}
	a, b := noRetry(p.a), noRetry(p.b)
	sbA, err := a.Acquire(ctx, sandbox.Key{Scope: p.a, ThreadID: "t", AgentID: "a"}, spec)
	if err != nil {
		t.Fatalf("A acquires: %v", err)
	}
	wait := sandbox.Shell("while [ ! -e /tmp/go ]; do sleep 0.1; done; echo released")
	results := make(chan error, flood)
	for range flood {
		go func() {
			res, err := sbA.Exec(ctx, wait, ".", 2*time.Minute)
			if err == nil && res.Stdout() != "released\n" {
				err = fmt.Errorf("exec answered %+v", res)
			}
			results <- err
		}()
	}
	var busy *messages.BusyError
	deadline := time.After(30 * time.Second)
	for i := range flood - perAccount {
		select {
		case err := <-results:
			if !errors.As(err, &busy) || !errors.Is(err, messages.ErrBusy) || busy.Account != p.a || busy.Limit != perAccount {
				t.Fatalf("A's exec %d over its bound: %v, want busy for account %s at %d", i, err, p.a, perAccount)
			}
		case <-deadline:
			t.Fatalf("after 30 s only %d of A's %d execs over its bound of %d were refused", i, flood-perAccount, perAccount)
		}
	}
	// A's two admitted execs are running: the engine is busy for A, not for B.
	for _, acc := range []string{p.b, p.a} {
		c := map[string]*client.Backend{p.a: a, p.b: b}[acc]
		h, err := c.Health(ctx)
		if err != nil || h.Status != service.HealthOK || h.InFlight < perAccount {
			t.Fatalf("%s's health while A floods: %+v, %v; want ok, with A's %d calls in flight", acc, h, err, perAccount)
		}
	}
	keyB := sandbox.Key{Scope: p.b, ThreadID: "t", AgentID: "a"}
	sbB, err := b.Acquire(ctx, keyB, spec)
	if err != nil {
		t.Fatalf("B acquires while A floods: %v", err)
	}
	if res, err := sbB.Exec(ctx, sandbox.Argv("echo", "served"), ".", time.Minute); err != nil || res.Stdout() != "served\n" {
		t.Fatalf("B execs while A floods: %+v, %v", res, err)
	}
	if _, err := sbA.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); !errors.As(err, &busy) {
		t.Fatalf("A's exec while at its bound: %v, want busy", err)
	}
	select {
	case err := <-results:
		t.Fatalf("one of A's waiting execs ended before its file appeared: %v", err)
	default:
	}

	dockertest.Docker(t, "exec", sbA.InstanceID(), "touch", "/tmp/go")
	for i := range perAccount {
		if err := <-results; err != nil {
			t.Fatalf("A's admitted exec %d: %v", i, err)
		}
	}
	if _, err := sbA.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatalf("A's exec once its calls finished: %v", err)
	}
}

// TestTenancyAccountBoundFreedBeforeTheAnswer: at a bound of one call per account, a tenant
// that calls again as soon as it hears each answer is never told busy: the engine gives the
// call's slot back before it sends the answer, not after.
func TestTenancyAccountBoundFreedBeforeTheAnswer(t *testing.T) {
	p := startTenantPoolWith(t, false, service.WithMaxInFlightPerAccount(1))
	ctx := itest.Context(t)
	c, err := client.New(ctx, p.conns[p.a], client.WithRetryWait(0))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Acquire(ctx, sandbox.Key{Scope: p.a, ThreadID: "t", AgentID: "a"}, itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec)))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	for i := range 200 {
		if _, err := sb.StatFile(ctx, ".", "."); err != nil {
			t.Fatalf("call %d, sent once the one before was answered: %v", i, err)
		}
	}
}

// TestServeTenancy: "engine serve --tenancy" against a server with tenant accounts serves a
// tenant its own scope and refuses the other's, as the service does in process.
func TestServeTenancy(t *testing.T) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	a, b := "it-sa-"+hex.EncodeToString(suffix), "it-sb-"+hex.EncodeToString(suffix)
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a, b)
	itest.StartServe(t, nil, "--nats-url", srv.ClientURL(), "--nats-user", "engine", "--nats-password", natstest.Password, "--tenancy")
	c, err := client.New(itest.Context(t), natstest.ConnectAs(t, srv, a))
	if err != nil {
		t.Fatal(err)
	}
	ctx := itest.Context(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec))
	own := sandbox.Key{Scope: a, ThreadID: "t", AgentID: "a"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := c.Dispose(ctx, own, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", own, f)
		}
	})
	sb, err := c.Acquire(ctx, own, spec)
	if err != nil {
		t.Fatalf("A acquires its own scope through engine serve: %v", err)
	}
	if res, err := sb.Exec(ctx, sandbox.Argv("echo", "hi"), ".", time.Minute); err != nil || res.Stdout() != "hi\n" {
		t.Fatalf("A execs: %+v, %v", res, err)
	}
	var fe *messages.ForbiddenError
	if _, err := c.Acquire(ctx, sandbox.Key{Scope: b, ThreadID: "t", AgentID: "a"}, spec); !errors.As(err, &fe) {
		t.Fatalf("A acquires B's scope through engine serve: %v, want forbidden", err)
	}
}
