package service_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
	"github.com/mafsandbox/engine/service"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEveryOperationThroughTheClient drives each call of the API once through the client
// against the fake backend.
func TestEveryOperationThroughTheClient(t *testing.T) {
	e := startEngine(t, newFake(t))
	c := newClient(t, e)
	ctx := ctxT(t)
	if c.Name() != "fake" || c.Isolation() != sandbox.IsolationNone || !c.Declarations().Capabilities.Has(sandbox.Snapshot) {
		t.Fatalf("declarations: %s %s %v", c.Name(), c.Isolation(), c.Declarations())
	}
	spec := testSpec(t, sandbox.WithDeclaredOutputs(sandbox.Output("out.txt")))
	sb, err := c.Acquire(ctx, testKey, spec)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if sb.InstanceID() == "" || sb.(*client.Sandbox).Engine() != e.svc.EngineID() {
		t.Fatalf("acquired %+v", sb)
	}
	if err := sb.WriteFile(ctx, "out.txt", []byte("hello"), "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got, err := sb.ReadFile(ctx, "out.txt", ".", 100); err != nil || string(got) != "hello" {
		t.Fatalf("read: %q, %v", got, err)
	}
	st, err := sb.StatFile(ctx, "out.txt", ".")
	if err != nil || st == nil || st.Kind != sandbox.EntryFile || *st.Size != 5 {
		t.Fatalf("stat: %+v, %v", st, err)
	}
	if st, err := sb.StatFile(ctx, "absent", "."); err != nil || st != nil {
		t.Fatalf("stat absent: %+v, %v", st, err)
	}
	if entries, err := sb.ListDir(ctx, ".", "."); err != nil || len(entries) != 1 {
		t.Fatalf("list: %+v, %v", entries, err)
	}
	e.fake.Sandbox().AddScript(sandboxTestScript("echo hi", "hi\n"))
	res, err := sb.Exec(ctx, sandbox.Shell("echo hi"), ".", time.Second)
	if err != nil || res.Stdout() != "hi\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if _, err := sb.RunCode(ctx, "print(1)", time.Second); err != nil {
		t.Fatalf("run code: %v", err)
	}
	var landed []string
	sink := &sandbox.OutputSink{Deliver: func(_ context.Context, a sandbox.Artifact) (sandbox.LandedArtifact, error) {
		landed = append(landed, a.Name+"="+string(a.Content))
		return sandbox.LandedArtifact{Name: a.Name}, nil
	}}
	if _, err := sb.(*client.Sandbox).CollectOutputs(ctx, sink, nil); err != nil || len(landed) != 1 || landed[0] != "out.txt=hello" {
		t.Fatalf("collect: %v, %v", landed, err)
	}
	if err := sb.Reclaim(ctx, "call-1", ".", time.Second); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if err := sb.Remove(ctx, "out.txt", ".", false); err != nil {
		t.Fatalf("remove: %v", err)
	}
	before := sb.InstanceID()
	if err := sb.Reset(ctx, time.Second); err != nil || sb.InstanceID() == before {
		t.Fatalf("reset: instance %s (was %s), %v", sb.InstanceID(), before, err)
	}
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" || h.Engine != e.svc.EngineID() || h.Sandboxes != 1 {
		t.Fatalf("health: %+v, %v", h, err)
	}
	if _, err := c.Reap(ctx, time.Hour, ""); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("reap without a reaper: %v, want unsupported", err)
	}
	if f := c.Dispose(ctx, testKey, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	if _, err := sb.StatFile(ctx, "x", "."); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a call on a disposed handle: %v, want an unknown sandbox", err)
	}
	if p := c.DisposeScope(ctx, "tenant", "thread"); p.Undisposed != nil {
		t.Fatalf("dispose scope: %+v", p)
	}
}

func sandboxTestScript(match, stdout string) sandboxtest.Script {
	return sandboxtest.Script{Match: match, Result: sandbox.ExecResultFromText(stdout, "", 0)}
}

// TestTypedErrorsCrossTheWire checks that a refusal on the engine comes back as the same
// typed error.
func TestTypedErrorsCrossTheWire(t *testing.T) {
	e := startEngine(t, newFake(t))
	c := newClient(t, e)
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	err = sb.WriteFile(ctx, "../escape", []byte("x"), ".")
	var nc *sandbox.NotConfinedError
	if !errors.As(err, &nc) || nc.Path != "../escape" || !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("write outside: %#v", err)
	}
	_, err = sb.ReadFile(ctx, "absent.txt", ".", 10)
	if !errors.Is(err, sandbox.ErrOS) {
		t.Fatalf("read absent: %v", err)
	}
	denied := testSpec(t, sandbox.WithEgress(sandbox.EgressUnrestricted))
	_, err = c.Acquire(ctx, testKey, denied)
	var ne *sandbox.EgressNotEnforcedError
	if !errors.As(err, &ne) || ne.Mode != sandbox.EgressUnrestricted || !errors.Is(err, sandbox.ErrRefused) {
		t.Fatalf("acquire with unrestricted egress: %#v", err)
	}
}

// rawRequest sends body to subject and returns the decoded reply, its error code header and
// the raw reply.
func rawRequest(t *testing.T, nc *nats.Conn, subject string, body []byte) (messages.APIResponse, string) {
	t.Helper()
	msg, err := nc.Request(subject, body, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var resp messages.APIResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatalf("reply %q is not JSON: %v", msg.Data, err)
	}
	return resp, msg.Header.Get(micro.ErrorCodeHeader)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// TestBadInputIsRefusedAndChangesNothing sends what a careless or hostile client might and
// checks that each gets a clear error reply and that the sandbox's files are untouched.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	e := startEngine(t, newFake(t), service.WithMaxRequestBytes(64*1024), service.WithChunkSize(4096))
	c := newClient(t, e)
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	handle := sb.(*client.Sandbox).Handle()
	engine := e.svc.EngineID()
	write := func(sub string) string { return messages.Engine(sub, messages.DefaultPrefix, engine) }
	key := &messages.APIKey{Scope: testKey.Scope, ThreadID: testKey.ThreadID, AgentID: testKey.AgentID}
	env := func(typ string) messages.APIEnvelope {
		return messages.APIEnvelope{Type: typ, Key: key, Sandbox: handle}
	}
	wf := func(mod func(*messages.APIWriteFileRequest)) []byte {
		r := &messages.APIWriteFileRequest{APIEnvelope: env(messages.APIWriteFileRequestType), Path: "f.txt", WorkDir: ".", Content: []byte("x")}
		mod(r)
		return mustJSON(t, r)
	}
	cases := []struct {
		name     string
		subject  string
		body     []byte
		wantCode string
		wantText string
	}{
		{"malformed JSON", write(messages.SubjectWriteFileT), []byte(`{"type": "maf.sandbox.api.v1.write_file_request",`), messages.CodeBadRequest, "malformed JSON"},
		{"not an object", write(messages.SubjectWriteFileT), []byte(`[1,2]`), messages.CodeBadRequest, "must be a JSON object"},
		{"no type", write(messages.SubjectWriteFileT), []byte(`{"path":"f.txt"}`), messages.CodeBadRequest, "no type"},
		{"unknown operation", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Type = messages.APITypePrefix + "format_disk_request" }), messages.CodeBadRequest, "unknown operation"},
		{"another version", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Type = "maf.sandbox.api.v2.write_file_request" }), messages.CodeBadRequest, "unknown operation"},
		{"unknown field", write(messages.SubjectWriteFileT), []byte(`{"type":"maf.sandbox.api.v1.write_file_request","key":{"scope":"tenant","thread_id":"thread","agent_id":"agent"},"sandbox":"` + handle + `","path":"f.txt","work_dir":".","content":"eA==","mode":"0777"}`), messages.CodeBadRequest, "unknown field"},
		{"missing key", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Key = nil }), messages.CodeBadRequest, "missing key"},
		{"key without agent", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Key = &messages.APIKey{Scope: "tenant", ThreadID: "thread"} }), messages.CodeBadRequest, "not acquired under this key"},
		{"another key's handle", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) {
			r.Key = &messages.APIKey{Scope: "other", ThreadID: "thread", AgentID: "agent"}
		}), messages.CodeBadRequest, "not acquired under this key"},
		{"missing handle", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Sandbox = "" }), messages.CodeBadRequest, "names no sandbox"},
		{"unknown handle", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Sandbox = "nope" }), messages.CodeUnknownSandbox, "acquire again"},
		{"oversized payload", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Content = bytes.Repeat([]byte("x"), 70*1024) }), messages.CodeBadRequest, "exceeds the engine's limit"},
		{"refused path", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Path = "../../etc/passwd" }), messages.CodeNotConfined, "not confined"},
		{"absolute path outside", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Path = "/etc/passwd" }), messages.CodeNotConfined, "not confined"},
		{"backslash", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Path = `a\b` }), messages.CodeNotConfined, "not confined"},
		{"wrong sha256", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.SHA256 = strings.Repeat("0", 64) }), messages.CodeBadRequest, "integrity check failed"},
		{"wrong size", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Size = 99 }), messages.CodeBadRequest, "integrity check failed"},
		{"unknown upload", write(messages.SubjectWriteFileT), wf(func(r *messages.APIWriteFileRequest) { r.Content, r.Upload, r.SHA256 = nil, "u1", "00" }), messages.CodeBadRequest, "no upload"},
		{"upload out of order", write(messages.SubjectUploadChunkT), mustJSON(t, &messages.APIUploadChunkRequest{APIEnvelope: env(messages.APIUploadChunkRequestType), Upload: "u2", Seq: 3, Data: []byte("x")}), messages.CodeBadRequest, "starts with chunk 3"},
		{"upload chunk too big", write(messages.SubjectUploadChunkT), mustJSON(t, &messages.APIUploadChunkRequest{APIEnvelope: env(messages.APIUploadChunkRequestType), Upload: "u3", Data: make([]byte, 5000)}), messages.CodeBadRequest, "exceeds the engine's chunk size"},
		{"stream to a wildcard", write(messages.SubjectExecT), mustJSON(t, &messages.APIExecRequest{APIEnvelope: env(messages.APIExecRequestType), Argv: []string{"true"}, WorkDir: ".", TimeoutMS: 1000, StreamTo: "x.>"}), messages.CodeBadRequest, "stream_to"},
		{"stream into the API", write(messages.SubjectExecT), mustJSON(t, &messages.APIExecRequest{APIEnvelope: env(messages.APIExecRequestType), Argv: []string{"true"}, WorkDir: ".", TimeoutMS: 1000, StreamTo: messages.SubjectAcquire}), messages.CodeBadRequest, "stream_to"},
		{"acquire without a key", messages.SubjectAcquire, mustJSON(t, &messages.APIAcquireRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIAcquireRequestType}, Spec: messages.APISpec{Kind: "shell", Image: "fake"}}), messages.CodeBadRequest, "missing key"},
		{"acquire with a bad spec", messages.SubjectAcquire, mustJSON(t, &messages.APIAcquireRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIAcquireRequestType, Key: key}, Spec: messages.APISpec{Kind: "shell", Egress: "wide-open"}}), messages.CodeInvalidArgument, "unknown egress"},
		{"dispose scope without scope", messages.SubjectDisposeScope, mustJSON(t, &messages.APIDisposeScopeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeScopeRequestType, Key: &messages.APIKey{ThreadID: "thread"}}}), messages.CodeBadRequest, "scope"},
		{"reap without an age", messages.SubjectReap, mustJSON(t, &messages.APIReapRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIReapRequestType}}), messages.CodeInvalidArgument, "older_than_ms"},
	}
	raw := newRawConn(t, e)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, header := rawRequest(t, raw, tc.subject, tc.body)
			if resp.Error == nil {
				t.Fatalf("no error in the reply %+v", resp)
			}
			if resp.Error.Code != tc.wantCode || header != tc.wantCode {
				t.Fatalf("code %q (header %q), want %q: %s", resp.Error.Code, header, tc.wantCode, resp.Error.Message)
			}
			if !strings.Contains(resp.Error.Message, tc.wantText) {
				t.Fatalf("message %q does not say %q", resp.Error.Message, tc.wantText)
			}
			if !strings.HasPrefix(resp.Type, messages.APITypePrefix) || !strings.HasSuffix(resp.Type, "_response") {
				t.Fatalf("reply type %q", resp.Type)
			}
		})
	}
	if paths := e.fake.Sandbox().Paths(); !slicesEqual(paths, baselinePaths(t)) {
		t.Fatalf("the bad input changed the sandbox: %v", paths)
	}
	// The engine still serves after all of it.
	if err := sb.WriteFile(ctx, "ok.txt", []byte("fine"), "."); err != nil {
		t.Fatalf("a good write after the bad ones: %v", err)
	}
}

// baselinePaths is what a fresh fake sandbox holds: its storage base and ancestors.
func baselinePaths(t *testing.T) []string {
	t.Helper()
	return newFake(t).Sandbox().Paths()
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

func newRawConn(t *testing.T, e *engine) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestLargeFilesTravelInChunks writes and reads files above the chunk size and checks them
// byte for byte, and refuses one above the file limit before sending it.
func TestLargeFilesTravelInChunks(t *testing.T) {
	e := startEngine(t, newFake(t), service.WithChunkSize(1024), service.WithMaxFileBytes(64*1024))
	c := newClient(t, e)
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	for _, size := range []int{0, 1, 1023, 1024, 1025, 10*1024 + 7, 64 * 1024} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			content := make([]byte, size)
			_, _ = rand.Read(content)
			name := fmt.Sprintf("f%d.bin", size)
			if err := sb.WriteFile(ctx, name, content, "."); err != nil {
				t.Fatalf("write: %v", err)
			}
			got, err := sb.ReadFile(ctx, name, ".", int64(size))
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !bytes.Equal(got, content) {
				t.Fatalf("read %d bytes, not the %d written", len(got), size)
			}
		})
	}
	err = sb.WriteFile(ctx, "big.bin", make([]byte, 64*1024+1), ".")
	var ce *sandbox.TransferCapExceededError
	if !errors.As(err, &ce) {
		t.Fatalf("a file above the limit: %v", err)
	}
	if _, err := sb.ReadFile(ctx, "f10247.bin", ".", 100); !errors.As(err, &ce) {
		t.Fatalf("a read above max bytes: %v", err)
	}
}

// TestExecStreamsBeforeTheCommandEnds runs a command that will not end until the client
// has seen its first chunk.
func TestExecStreamsBeforeTheCommandEnds(t *testing.T) {
	seen := make(chan struct{})
	fake := newFake(t)
	w := &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox { return &streaming{Sandbox: sb, seen: seen} }}
	e := startEngine(t, w)
	c := newClient(t, e)
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	var chunks []string
	res, err := sb.(*client.Sandbox).ExecStream(ctx, sandbox.Argv("slow"), ".", time.Minute, func(stream string, p []byte) {
		chunks = append(chunks, stream+":"+string(p))
		if len(chunks) == 1 {
			close(seen)
		}
	})
	if err != nil {
		t.Fatalf("exec stream: %v", err)
	}
	if want := []string{"stdout:first\n", "stderr:second\n"}; !slicesEqual(chunks, want) {
		t.Fatalf("chunks %q, want %q", chunks, want)
	}
	if res.ExitCode != 3 || res.Stdout() != "first\n" || res.Stderr() != "second\n" {
		t.Fatalf("result %+v", res)
	}
}

// TestExecStreamsAtTheEndWithoutALiveSandbox checks the fallback: the chunks come before
// the response even when the sandbox can only give its output at the end.
func TestExecStreamsAtTheEndWithoutALiveSandbox(t *testing.T) {
	e := startEngine(t, newFake(t), service.WithChunkSize(1024))
	c := newClient(t, e)
	ctx := ctxT(t)
	out := strings.Repeat("0123456789", 300)
	e.fake.Sandbox().AddScript(sandboxTestScript("big", out))
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	var got bytes.Buffer
	res, err := sb.(*client.Sandbox).ExecStream(ctx, sandbox.Shell("big"), ".", time.Minute, func(stream string, p []byte) {
		if stream == service.StreamStdout {
			got.Write(p)
		}
	})
	if err != nil || res.Stdout() != out || got.String() != out {
		t.Fatalf("streamed %d bytes, result %d bytes, want %d: %v", got.Len(), len(res.StdoutBytes), len(out), err)
	}
}

// TestStopDrainsInFlightCalls stops the engine while an exec is running: the exec gets its
// answer, Stop waits for it, and a call after the stop is told no engine answers.
func TestStopDrainsInFlightCalls(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	fake := newFake(t)
	w := &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox {
		return &blocking{Sandbox: sb, started: started, release: release}
	}}
	e := startEngine(t, w)
	c := newClient(t, e, client.WithRetryWait(0))
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	type result struct {
		res sandbox.ExecResult
		err error
	}
	execDone := make(chan result, 1)
	go func() {
		res, err := sb.Exec(ctx, sandbox.Argv("wait"), ".", time.Minute)
		execDone <- result{res, err}
	}()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- e.svc.Stop(ctx) }()
	// Stop cannot return while the exec runs; a health call sees the drain or no engine.
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a call was in flight", err)
	case r := <-execDone:
		t.Fatalf("the exec returned (%v) before it was released", r.err)
	default:
	}
	close(release)
	r := <-execDone
	if r.err != nil || string(r.res.StdoutBytes) != "done" {
		t.Fatalf("the in-flight exec: %+v, %v", r.res, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	_, err = sb.StatFile(ctx, "x", ".")
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call after the stop: %v, want engine unavailable", err)
	}
	if _, err := c.Acquire(ctx, testKey, testSpec(t)); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("an acquire after the stop: %v, want engine unavailable", err)
	}
}

// TestAClientWaitingThroughARestartGetsAnAnswer stops the only engine and starts another on
// the same server while a client keeps asking: its cold call is retried until the new
// engine answers.
func TestAClientWaitingThroughARestartGetsAnAnswer(t *testing.T) {
	e := startEngine(t, newFake(t))
	c := newClient(t, e)
	ctx := ctxT(t)
	if err := e.svc.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, testKey, testSpec(t))
		answered <- err
	}()
	second := startEngineOn(t, e.srv, newFake(t))
	if err := <-answered; err != nil {
		t.Fatalf("the acquire across the restart: %v", err)
	}
	if h, err := c.Health(ctx); err != nil || h.Engine != second.svc.EngineID() {
		t.Fatalf("health after the restart: %+v, %v", h, err)
	}
}

// TestConcurrentClients acquires from many clients at once, on distinct keys and on one.
func TestConcurrentClients(t *testing.T) {
	e := startEngine(t, newFake(t))
	ctx := ctxT(t)
	const n = 20
	errs := make(chan error, 2*n)
	for i := range n {
		c := newClient(t, e)
		go func() {
			key := sandbox.Key{Scope: "tenant", ThreadID: fmt.Sprint("t", i), AgentID: "a"}
			sb, err := c.Acquire(ctx, key, testSpec(t))
			if err == nil {
				err = sb.WriteFile(ctx, fmt.Sprintf("f%d", i), []byte("x"), ".")
			}
			errs <- err
		}()
		go func() {
			sb, err := c.Acquire(ctx, testKey, testSpec(t))
			if err == nil {
				_, err = sb.StatFile(ctx, ".", ".")
			}
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Errorf("client: %v", err)
		}
	}
}

// TestMicroDiscovery checks that the engine answers nats micro's PING with its ID.
func TestMicroDiscovery(t *testing.T) {
	e := startEngine(t, newFake(t))
	nc := newRawConn(t, e)
	subject, err := micro.ControlSubject(micro.PingVerb, messages.ServiceName, "")
	if err != nil {
		t.Fatalf("control subject: %v", err)
	}
	msg, err := nc.Request(subject, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Metadata["engine"] != e.svc.EngineID() {
		t.Fatalf("ping %s: %v", msg.Data, err)
	}
}

// TestAClientNoticesAnEngineThatDied closes the engine's connection (as a crash would) with
// an exec in flight: the client's liveness probe finds nobody on the engine's alive subject
// and the call fails at once as unavailable, instead of waiting out its timeout.
func TestAClientNoticesAnEngineThatDied(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	fake := newFake(t)
	w := &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox {
		return &blocking{Sandbox: sb, started: started, release: release}
	}}
	e := startEngine(t, w)
	c := newClient(t, e, client.WithLivenessInterval(20*time.Millisecond), client.WithCallTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Argv("wait"), ".", time.Hour)
		done <- err
	}()
	<-started
	e.nc.Close()
	err = <-done
	var ue *messages.EngineUnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "in flight") {
		t.Fatalf("the exec on a dead engine: %v, want engine unavailable with the call in flight", err)
	}
}
