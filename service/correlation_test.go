package service_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/service"
)

// requestWith sends body to subject with the headers and returns the reply message.
func requestWith(t *testing.T, nc *nats.Conn, subject string, body []byte, header nats.Header) *nats.Msg {
	t.Helper()
	msg, err := nc.RequestMsg(&nats.Msg{Subject: subject, Data: body, Header: header}, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

// TestRequestIDIsEchoed checks the correlation headers of replies: a caller's X-Request-Id
// comes back unchanged, on success and on error; without one (or with one the engine
// refuses) the engine mints a fresh ID; a valid traceparent is echoed, an invalid one not.
func TestRequestIDIsEchoed(t *testing.T) {
	e := startEngine(t, newFake(t))
	nc := newRawConn(t, e)
	health := mustJSON(t, &messages.APIHealthRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIHealthRequestType}})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := []struct {
		name       string
		subject    string
		body       []byte
		header     nats.Header
		wantID     string // "" when the engine mints one
		wantTrace  string
		wantErrHdr string
	}{
		{"given", messages.SubjectHealth, health, nats.Header{messages.RequestIDHeader: {"req-42"}}, "req-42", "", ""},
		{"given, on an error", messages.SubjectHealth, []byte(`{"type":"nope"}`), nats.Header{messages.RequestIDHeader: {"req-43"}}, "req-43", "", messages.CodeBadRequest},
		{"minted", messages.SubjectHealth, health, nil, "", "", ""},
		{"minted on an error", messages.SubjectHealth, []byte(`[`), nil, "", "", messages.CodeBadRequest},
		{"too long", messages.SubjectHealth, health, nats.Header{messages.RequestIDHeader: {string(make([]byte, 129))}}, "", "", ""},
		{"with white space", messages.SubjectHealth, health, nats.Header{messages.RequestIDHeader: {"a b"}}, "", "", ""},
		{"traceparent", messages.SubjectHealth, health, nats.Header{messages.TraceparentHeader: {tp}}, "", tp, ""},
		{"both", messages.SubjectHealth, health, nats.Header{messages.RequestIDHeader: {"req-44"}, messages.TraceparentHeader: {tp}}, "req-44", tp, ""},
		{"bad traceparent", messages.SubjectHealth, health, nats.Header{messages.TraceparentHeader: {"00-zz-00f067aa0ba902b7-01"}}, "", "", ""},
		{"zero trace ID", messages.SubjectHealth, health, nats.Header{messages.TraceparentHeader: {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, "", "", ""},
	}
	minted := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := requestWith(t, nc, tc.subject, tc.body, tc.header)
			id := msg.Header.Get(messages.RequestIDHeader)
			switch {
			case tc.wantID != "" && id != tc.wantID:
				t.Errorf("request ID %q, want %q", id, tc.wantID)
			case tc.wantID == "" && (!messages.ValidToken(id) || minted[id]):
				t.Errorf("minted request ID %q: not a fresh token (minted so far %v)", id, minted)
			}
			minted[id] = true
			if got := msg.Header.Get(messages.TraceparentHeader); got != tc.wantTrace {
				t.Errorf("traceparent %q, want %q", got, tc.wantTrace)
			}
			if got := msg.Header.Get(micro.ErrorCodeHeader); got != tc.wantErrHdr {
				t.Errorf("error code %q, want %q", got, tc.wantErrHdr)
			}
		})
	}
}

// TestExecChunksCarryTheExecID streams two execs to one subject: every chunk carries its
// exec's ID (the one its reply gives) and its call's request ID, in the body and the header,
// so the two streams can be told apart.
func TestExecChunksCarryTheExecID(t *testing.T) {
	e := startEngine(t, newFake(t))
	c := newClient(t, e)
	ctx := ctxT(t)
	e.fake.Sandbox().AddScript(sandboxTestScript("one", "first output\n"))
	e.fake.Sandbox().AddScript(sandboxTestScript("two", "second output\n"))
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	nc := newRawConn(t, e)
	inbox := nc.NewInbox()
	chunks, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	key := &messages.APIKey{Scope: testKey.Scope, ThreadID: testKey.ThreadID, AgentID: testKey.AgentID}
	subject := messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, e.svc.EngineID())
	want := map[string]string{} // exec ID → request ID
	for _, cmd := range []string{"one", "two"} {
		req := &messages.APIExecRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIExecRequestType, Key: key, Sandbox: sb.(*client.Sandbox).Handle()},
			Shell: cmd, WorkDir: ".", TimeoutMS: 10_000, StreamTo: inbox}
		msg := requestWith(t, nc, subject, mustJSON(t, req), nats.Header{messages.RequestIDHeader: {"req-" + cmd}})
		var resp messages.APIExecResponse
		if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error != nil || resp.ExecID == "" || resp.Chunks != 1 {
			t.Fatalf("exec %s: %s, %v", cmd, msg.Data, err)
		}
		want[resp.ExecID] = "req-" + cmd
	}
	if len(want) != 2 {
		t.Fatalf("the two execs share an ID: %v", want)
	}
	for range 2 {
		m, err := chunks.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("chunk: %v", err)
		}
		var ch messages.APIExecChunk
		if err := json.Unmarshal(m.Data, &ch); err != nil {
			t.Fatalf("chunk %s: %v", m.Data, err)
		}
		rid, ok := want[ch.ExecID]
		if !ok || ch.RequestID != rid || m.Header.Get(messages.RequestIDHeader) != rid {
			t.Errorf("chunk %s (header %v): want one of the execs %v", m.Data, m.Header, want)
		}
		delete(want, ch.ExecID)
	}
}

// TestEveryLogLineOfACallHasItsHandleAndKey records the engine's logs through a streamed
// exec and checks that each line of the call names its request ID, trace ID, key and handle.
func TestEveryLogLineOfACallHasItsHandleAndKey(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := startEngine(t, newFake(t), service.WithLogger(zap.New(core)))
	c := newClient(t, e)
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	nc := newRawConn(t, e)
	key := &messages.APIKey{Scope: testKey.Scope, ThreadID: testKey.ThreadID, AgentID: testKey.AgentID}
	handle := sb.(*client.Sandbox).Handle()
	req := &messages.APIExecRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIExecRequestType, Key: key, Sandbox: handle},
		Shell: "echo", WorkDir: ".", TimeoutMS: 10_000, StreamTo: "nobody.listens"}
	requestWith(t, nc, messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, e.svc.EngineID()), mustJSON(t, req),
		nats.Header{messages.RequestIDHeader: {"log-test"}, messages.TraceparentHeader: {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	lines := logs.FilterField(zap.String("request_id", "log-test")).All()
	if len(lines) < 2 {
		t.Fatalf("%d log lines of the call, want the exec's and the reply's: %v", len(lines), logs.All())
	}
	for _, l := range lines {
		f := l.ContextMap()
		if f["key"] != testKey.String() || f["handle"] != handle || f["op"] != "exec" || f["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("log line %q has fields %v, want key %s and handle %s", l.Message, f, testKey, handle)
		}
	}
}

// TestTheClientSendsTheContextsRequestID checks that a Go host's request ID reaches the
// engine's log lines through client.ContextWithRequestID.
func TestTheClientSendsTheContextsRequestID(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := startEngine(t, newFake(t), service.WithLogger(zap.New(core)))
	c := newClient(t, e)
	ctx := client.ContextWithRequestID(ctxT(t), "host-7")
	if _, err := c.Acquire(ctx, testKey, testSpec(t)); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	lines := logs.FilterField(zap.String("request_id", "host-7")).All()
	if len(lines) == 0 || lines[0].ContextMap()["op"] != "acquire" {
		t.Fatalf("log lines of the acquire: %v", lines)
	}
}
