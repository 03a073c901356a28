package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// TestServiceWaitMSEndsTheWaitNotTheCommand sends an exec with wait_ms 1000 running
// `sleep 3; echo x > f`: the engine replies deadline_exceeded after about a second and holds
// no call for it, the sandbox stays and keeps serving, and the command inside runs to its
// end (Docker has no per-command kill; only timeout_ms stops a command, by removing the
// sandbox). docs/nats-api.md promises exactly this.
func TestServiceWaitMSEndsTheWaitNotTheCommand(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	ctx := itest.Context(t)
	key := itest.NewKey(t)
	sb := itest.AcquireRemote(t, c, e.Backend, key, itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)))
	instance := sb.InstanceID()
	body, err := json.Marshal(&messages.APIExecRequest{
		APIEnvelope: messages.APIEnvelope{Type: messages.APIExecRequestType, Key: messages.KeyToWire(key),
			Sandbox: sb.(*client.Sandbox).Handle(), WaitMS: 1000},
		Shell: "sleep 3; echo x > f", WorkDir: ".", TimeoutMS: 60_000})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	nc := natstest.Connect(t, e.Server)
	start := time.Now()
	msg, err := nc.RequestMsg(&nats.Msg{Subject: messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, e.Service.EngineID()),
		Data: body, Header: nats.Header{messages.RequestIDHeader: {"wait-ms-test"}}}, 30*time.Second)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	var resp messages.APIExecResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error == nil || resp.Error.Code != messages.CodeDeadlineExceeded {
		t.Fatalf("exec with wait_ms 1000 answered %s (%v), want deadline_exceeded", msg.Data, err)
	}
	if elapsed < 900*time.Millisecond || elapsed > 2500*time.Millisecond {
		t.Errorf("the reply came after %s, want about the 1 s wait", elapsed)
	}
	if got := msg.Header.Get(messages.RequestIDHeader); got != "wait-ms-test" {
		t.Errorf("reply request ID %q", got)
	}
	if h, err := c.Health(ctx); err != nil || h.InFlight != 0 {
		t.Errorf("health after the abandoned exec: %+v, %v; want no call in flight", h, err)
	}
	// The command is still running: f does not exist yet, the sandbox answers meanwhile.
	if st, err := sb.StatFile(ctx, "f", "."); err != nil || st != nil {
		t.Fatalf("f right after the abandoned exec: %+v, %v; want absent", st, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := sb.ReadFile(ctx, "f", ".", 16)
		if err == nil {
			if string(got) != "x\n" {
				t.Fatalf("f holds %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("f never appeared: the command was stopped, which docs/nats-api.md says it is not: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if time.Since(start) < 2500*time.Millisecond {
		t.Errorf("f appeared after %s, before the command's sleep 3 ended", time.Since(start))
	}
	res, err := sb.Exec(ctx, sandbox.Shell("echo still here"), ".", time.Minute)
	if err != nil || strings.TrimSpace(res.Stdout()) != "still here" {
		t.Fatalf("exec after the abandoned one: %+v, %v", res, err)
	}
	again, err := c.Acquire(ctx, key, itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)))
	if err != nil || again.InstanceID() != instance {
		t.Fatalf("acquire after the abandoned exec: %v, %v; want the same sandbox %s", again, err, instance)
	}
}

// TestServiceMicroStatsMeasureTheRealWork acquires a fresh sandbox (a container create,
// hundreds of milliseconds) and sends a read the protocol refuses, then reads
// $SRV.STATS: the acquire's processing time covers what the client waited, and the refused
// read is counted as an error with its code.
func TestServiceMicroStatsMeasureTheRealWork(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	ctx := itest.Context(t)
	start := time.Now()
	sb := itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), itest.BusyboxSpec(t))
	waited := time.Since(start)
	if _, err := sb.ReadFile(ctx, "../../etc/passwd", ".", 4096); err == nil {
		t.Fatalf("a read outside the sandbox succeeded")
	}
	subject, err := micro.ControlSubject(micro.StatsVerb, messages.ServiceName, e.Service.EngineID())
	if err != nil {
		t.Fatalf("control subject: %v", err)
	}
	// micro counts a request after its handler returns, and the handler returns after it has
	// sent the reply: the client can hold the answer before the count moves, so read the
	// stats until the refused read is in them.
	nc := natstest.Connect(t, e.Server)
	var acq, read *micro.EndpointStats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		msg, err := nc.Request(subject, nil, 10*time.Second)
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		var st micro.Stats
		if err := json.Unmarshal(msg.Data, &st); err != nil {
			t.Fatalf("stats %s: %v", msg.Data, err)
		}
		by := map[string]*micro.EndpointStats{}
		for _, ep := range st.Endpoints {
			by[ep.Name] = ep
		}
		acq, read = by["acquire"], by["read_file"]
		if acq == nil || read == nil {
			t.Fatalf("stats endpoints %s", msg.Data)
		}
		if read.NumRequests > 0 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("client waited %s for the acquire; the engine counted %s", waited, acq.ProcessingTime)
	if acq.NumRequests != 1 || acq.NumErrors != 0 || acq.ProcessingTime < waited/2 || acq.ProcessingTime > waited {
		t.Errorf("acquire stats %+v; want 1 request, no error, between %s and %s", acq, waited/2, waited)
	}
	if read.NumRequests != 1 || read.NumErrors != 1 || !strings.HasPrefix(read.LastError, messages.CodeNotConfined+": ") {
		t.Errorf("read_file stats %+v; want 1 request, 1 not_confined error", read)
	}
}
