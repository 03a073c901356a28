package process

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestProcessTenancyAttacks: on one engine serving two tenants (two NATS accounts, the
// deployment of docs/operations.md#tenancy), tenant B tries every way at tenant A's process:
// each process call with A's handle, under A's key and under its own, is refused (forbidden),
// and B, subscribed to every subject its account can see, never sees a byte of A's output,
// which A reads whole.
func TestProcessTenancyAttacks(t *testing.T) {
	const a, b = "tenant-a", "tenant-b"
	srv := natstest.RunTenants(t, "ENGINE", messages.DefaultPrefix, a, b)
	engineNC := natstest.ConnectAs(t, srv, "ENGINE")
	store, err := events.NewProcessStreams(natstest.ConnectAs(t, srv, "ENGINE")) // the events' own connection, as engine serve has
	if err != nil {
		t.Fatal(err)
	}
	backend := channelBackend(t, actors.WithProcessStore(store))
	svc := itest.ServeBackendOn(t, engineNC, backend, service.WithTenancy(service.DefaultTenancy()))

	// B listens to everything its account can see.
	var mu sync.Mutex
	var seenByB bytes.Buffer
	bNC := natstest.ConnectAs(t, srv, b)
	if _, err := bNC.Subscribe(">", func(m *nats.Msg) { mu.Lock(); seenByB.Write(m.Data); mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	if err := bNC.Flush(); err != nil {
		t.Fatal(err)
	}

	ca, err := client.New(itest.Context(t), natstest.ConnectAs(t, srv, a))
	if err != nil {
		t.Fatal(err)
	}
	keyA := sandbox.Key{Scope: a, ThreadID: "t", AgentID: "a"}
	sbA := itest.AcquireRemote(t, ca, backend, keyA, itest.BusyboxSpec(t)).(*client.Sandbox)
	const secret = "secret-of-tenant-a"
	p, err := sbA.StartProcess(itest.Context(t), sandbox.ProcessSpec{ID: "a-proc", Command: sandbox.Shell("echo " + secret + "; cat"), Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, sbA, p.ID, secret)

	raw := func(key string, req any, op string) string {
		t.Helper()
		body, _ := json.Marshal(req)
		reply, err := bNC.Request(messages.DefaultPrefix+".v1.engine."+svc.EngineID()+"."+op, body, 30*time.Second)
		if err != nil {
			t.Fatalf("%s as B: %v", op, err)
		}
		var r messages.APIResponse
		_ = json.Unmarshal(reply.Data, &r)
		if r.Error == nil {
			return ""
		}
		return r.Error.Code
	}
	envOf := func(typ, scope string) messages.APIEnvelope {
		return messages.APIEnvelope{Type: typ, Key: &messages.APIKey{Scope: scope, ThreadID: "t", AgentID: "a"}, Sandbox: sbA.Handle()}
	}
	for _, scope := range []string{a, b} {
		cases := []struct {
			op  string
			req any
		}{
			{"process_read", &messages.APIProcessReadRequest{APIEnvelope: envOf(messages.APIProcessReadRequestType, scope), ID: p.ID}},
			{"process_list", &messages.APIProcessListRequest{APIEnvelope: envOf(messages.APIProcessListRequestType, scope)}},
			{"process_stdin", &messages.APIProcessStdinRequest{APIEnvelope: envOf(messages.APIProcessStdinRequestType, scope), ID: p.ID, Data: []byte("pwned\n")}},
			{"process_signal", &messages.APIProcessSignalRequest{APIEnvelope: envOf(messages.APIProcessSignalRequestType, scope), ID: p.ID, Signal: "KILL"}},
			{"process_wait", &messages.APIProcessWaitRequest{APIEnvelope: envOf(messages.APIProcessWaitRequestType, scope), ID: p.ID}},
			{"process_start", &messages.APIProcessStartRequest{APIEnvelope: envOf(messages.APIProcessStartRequestType, scope), Process: messages.APIProcessSpec{Shell: "echo pwned"}}},
		}
		for _, tc := range cases {
			if code := raw(scope, tc.req, tc.op); code != messages.CodeForbidden {
				t.Errorf("B's %s on A's process under scope %s: %q, want forbidden", tc.op, scope, code)
			}
		}
	}
	if err := sbA.CloseProcessStdin(itest.Context(t), p.ID); err != nil {
		t.Fatal(err)
	}
	out, _, exit := readAll(t, sbA, p.ID, 0, 1<<20)
	if string(out) != secret+"\n" || exit.Reason != sandbox.ExitExited {
		t.Fatalf("A reads %q, %+v: B's calls reached the process", out, exit)
	}
	if err := bNC.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if bytes.Contains(seenByB.Bytes(), []byte(secret)) {
		t.Fatal("tenant B saw tenant A's process output")
	}
}
