package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestServeAuditTrail drives a conversation through engine serve (real Docker, the embedded
// NATS with JetStream) and reads its audit trail back from the MAF_SANDBOX_AUDIT stream: one
// event per act, on the scope's and kind's subject, carrying the key, the instance, the
// engine, the request ID and the caller's traceparent; a command's digest but never its text;
// the file crossings' sizes and digests; a confinement refusal on its own subject.
func TestServeAuditTrail(t *testing.T) {
	nc, c := itest.ServeClient(t, itest.StartServe(t, nil))
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	sb := itest.AcquireRemote(t, c, itest.NewBackend(t), key, spec)

	// One call carries the caller's trace and request ID.
	tp := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 1, 2, 3}, SpanID: trace.SpanID{0xa1, 2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	traced := client.ContextWithRequestID(trace.ContextWithRemoteSpanContext(itest.Context(t), tp), "audit-req-1")
	const secret = "SECRET-TOKEN-4711"
	argv := []string{"sh", "-c", "echo " + secret}
	res, err := sb.Exec(traced, sandbox.Argv(argv...), ".", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	ctx := itest.Context(t)
	if res, err := sb.Exec(ctx, sandbox.Shell("exit 3"), ".", time.Minute); err != nil || res.ExitCode != 3 {
		t.Fatalf("exec exit 3: %+v, %v", res, err)
	}
	if err := sb.WriteFile(ctx, "a.txt", []byte("hello"), "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := sb.ReadFile(ctx, "a.txt", ".", 1<<20); err != nil {
		t.Fatalf("read: %v", err)
	}
	var nce *sandbox.NotConfinedError
	if err := sb.WriteFile(ctx, "../../escape.txt", []byte("x"), "."); !errors.As(err, &nce) {
		t.Fatalf("write outside the sandbox: %v, want NotConfinedError", err)
	}
	// The same key again, running: reused; then stopped under the engine: restarted.
	again, err := c.Acquire(ctx, key, spec)
	if err != nil || again.InstanceID() != sb.InstanceID() {
		t.Fatalf("acquire again: %v (instance %s, want %s)", err, again.InstanceID(), sb.InstanceID())
	}
	dockertest.Docker(t, "stop", "-t", "0", sb.InstanceID())
	if _, err := c.Acquire(ctx, key, spec); err != nil {
		t.Fatalf("acquire a stopped sandbox: %v", err)
	}
	if f := c.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}

	scoped := events.DefaultSubjectPrefix + ".audit." + events.Token(key.Scope) + ".>"
	got := readAudit(t, nc, scoped, 9)
	byType := map[string][]events.AuditEvent{}
	for _, m := range got {
		var ev events.AuditEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatalf("not an audit event: %v\n%s", err, m.Data())
		}
		if strings.Contains(string(m.Data()), secret) {
			t.Errorf("an audit event carries the command's text: %s", m.Data())
		}
		if want := events.AuditSubject(events.DefaultSubjectPrefix, key.Scope, ev.Kind, ev.Type); m.Subject() != want {
			t.Errorf("%s on %s, want %s", ev.Type, m.Subject(), want)
		}
		if ev.Schema != events.SchemaAudit || ev.ID == "" || m.Headers().Get(events.HeaderMsgID) != ev.ID || ev.Engine == "" ||
			ev.Engine == "unknown" || ev.Service == "" || ev.RequestID == "" || ev.Key == nil || ev.Key.Scope != key.Scope {
			t.Errorf("event lacks its identity: %s", m.Data())
		}
		byType[ev.Type] = append(byType[ev.Type], ev)
	}
	one := func(typ string) events.AuditEvent {
		t.Helper()
		if len(byType[typ]) != 1 {
			t.Fatalf("%d %s events, want 1: %v", len(byType[typ]), typ, byType)
		}
		return byType[typ][0]
	}
	acquires := byType[events.AuditSandboxAcquired]
	if len(acquires) != 3 {
		t.Fatalf("%d acquire events, want 3", len(acquires))
	}
	for i, want := range []string{sandbox.OutcomeCreated, sandbox.OutcomeReused, sandbox.OutcomeRestarted} {
		a := acquires[i]
		if a.Outcome != want || a.InstanceID != sb.InstanceID() || a.Kind != spec.Kind || a.Acquire == nil || a.Acquire.Image != spec.Image ||
			!strings.HasPrefix(a.Acquire.ImageID, "sha256:") || a.Acquire.Egress != string(sandbox.EgressClosed) {
			t.Errorf("acquire %d: %+v %+v, want outcome %s", i, a, a.Acquire, want)
		}
	}
	execs := byType[events.AuditExecFinished]
	if len(execs) != 2 {
		t.Fatalf("%d exec events, want 2", len(execs))
	}
	first, second := execs[0], execs[1]
	if first.RequestID != "audit-req-1" || first.Traceparent != "00-"+tp.TraceID().String()+"-"+tp.SpanID().String()+"-01" {
		t.Errorf("the traced exec's event: request %q traceparent %q", first.RequestID, first.Traceparent)
	}
	sum, _ := json.Marshal(argv)
	digest := sha256.Sum256(sum)
	if e := first.Exec; e == nil || e.Form != "argv" || e.Argv0 != "sh" || e.CommandSHA256 != hex.EncodeToString(digest[:]) ||
		e.ExitCode == nil || *e.ExitCode != 0 || e.StdoutBytes != int64(len(secret)+1) || first.InstanceID != sb.InstanceID() {
		t.Errorf("exec event %+v %+v", first, first.Exec)
	}
	if e := second.Exec; e == nil || e.Form != "shell" || e.Argv0 != "" || e.ExitCode == nil || *e.ExitCode != 3 || second.Outcome != sandbox.OutcomeOK {
		t.Errorf("exit-3 exec event %+v %+v", second, second.Exec)
	}
	hello := sha256.Sum256([]byte("hello"))
	if w := one(events.AuditFileWritten); w.File == nil || w.File.Direction != "in" || w.File.Path != "a.txt" || w.File.Size != 5 ||
		w.File.SHA256 != hex.EncodeToString(hello[:]) {
		t.Errorf("written: %+v %+v", w, w.File)
	}
	if r := one(events.AuditFileRead); r.File == nil || r.File.Direction != "out" || r.File.Size != 5 || r.File.SHA256 != hex.EncodeToString(hello[:]) {
		t.Errorf("read: %+v %+v", r, r.File)
	}
	if r := one(events.AuditFileRefused); r.Outcome != sandbox.OutcomeRefused || r.Error != messages.CodeNotConfined || r.File == nil ||
		r.File.Path != "../../escape.txt" || r.File.SHA256 != "" {
		t.Errorf("refused: %+v %+v", r, r.File)
	}
	if d := one(events.AuditSandboxDisposed); d.Outcome != sandbox.OutcomeOK || d.Disposal == nil || d.Disposal.Undisposed != "" {
		t.Errorf("disposed: %+v", d)
	}
	// The confinement refusal alone, by its subject: what an alert subscribes to.
	refusals := readAudit(t, nc, events.DefaultSubjectPrefix+".audit.*.*.file.refused", 1)
	if len(refusals) != 1 {
		t.Errorf("%d events on the refusals' subject, want 1", len(refusals))
	}
	started := readAudit(t, nc, events.DefaultSubjectPrefix+".audit._._.engine.started", 1)
	var st events.AuditEvent
	if len(started) != 1 || json.Unmarshal(started[0].Data(), &st) != nil || st.Service == "" || st.Engine == "" {
		t.Errorf("engine.started: %d events, the first %s; want one naming the engine (service) and its daemon (engine)", len(started), started[0].Data())
	}
}

// readAudit reads the audit stream's events on filter from the start until it has at least n
// (waiting up to 30 s for them to land) and then whatever else is there.
func readAudit(t *testing.T, nc *nats.Conn, filter string, n int) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(itest.Context(t), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		st, err := js.Stream(ctx, events.StreamAudit)
		if err == nil {
			out = fetchAll(ctx, t, st, filter)
			if len(out) >= n {
				return out
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the audit stream holds %d events on %s after 30 s, want %d (%v)", len(out), filter, n, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func fetchAll(ctx context.Context, t *testing.T, st jetstream.Stream, filter string) []jetstream.Msg {
	t.Helper()
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, n := range info.State.Subjects {
		want += n
	}
	if want == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for uint64(len(out)) < want {
		batch, err := cons.Fetch(int(want)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			out = append(out, m)
			got++
		}
		if got == 0 {
			break
		}
	}
	return out
}

// TestAuditWhileNATSIsAway stops the events' NATS server under a running engine (its API on
// another server, so calls still arrive): the calls are answered as before, their audit
// events are held up to the audit outbox's capacity and the overflow is refused and counted;
// once the server is back on the same port and store, the held events land in the stream in
// the calls' order, each once.
func TestAuditWhileNATSIsAway(t *testing.T) {
	api := natstest.Run(t)
	dir := t.TempDir()
	evSrv := natstest.RunWithOptions(t, natstest.Options(dir))
	port := evSrv.Addr().(*net.TCPAddr).Port
	evNC := natstest.Connect(t, evSrv, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	const capacity = 4
	ev, err := events.New(itest.Context(t), evNC, events.WithAuditOutbox(events.WithCapacity(capacity)),
		events.WithOutbox(events.WithBackoff(20*time.Millisecond, 100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: the restarted server's clean-up runs first, and the service's stop after it
		// still records engine.draining and engine.stopped, which nothing can deliver then.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = ev.Close(ctx)
	})
	backend := itest.NewBackend(t)
	itest.ServeObserved(t, api, backend, ev)
	remote := (&itest.NATSEngine{Server: api, Backend: backend}).Remote(t)
	key := itest.NewKey(t)
	sb := itest.AcquireRemote(t, remote, backend, key, itest.BusyboxSpec(t))
	waitUntil(t, "engine.started and sandbox.acquired delivered", func() bool { return ev.AuditStats().Delivered == 2 })

	evSrv.Shutdown()
	evSrv.WaitForShutdown()
	for i := range capacity + 2 {
		ctx := client.ContextWithRequestID(itest.Context(t), fmt.Sprintf("away-%d", i))
		if res, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %d with the events' NATS away: %+v, %v", i, res, err)
		}
	}
	waitUntil(t, "the overflow refused", func() bool { st := ev.AuditStats(); return st.Pending == capacity && st.Refused == 2 })

	natstest.RunWithOptions(t, func() *server.Options { o := natstest.Options(dir); o.Port = port; return o }())
	waitUntil(t, "the held events delivered", func() bool { st := ev.AuditStats(); return st.Pending == 0 && st.Delivered == 2+capacity })
	got := readAudit(t, evNC, events.DefaultSubjectPrefix+".audit."+events.Token(key.Scope)+".*.exec.finished", capacity)
	if len(got) != capacity {
		t.Fatalf("%d exec events in the stream, want %d", len(got), capacity)
	}
	for i, m := range got {
		var a events.AuditEvent
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("away-%d", i); a.RequestID != want || a.Exec == nil || a.Exec.ExitCode == nil || *a.Exec.ExitCode != 0 {
			t.Errorf("held event %d: request %q exec %+v, want %s's", i, a.RequestID, a.Exec, want)
		}
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuditDaemonAwayAndBack puts a socket of the test's own between the engine and the
// Docker daemon, closes it and opens it again: the engine's daemon probe records
// engine.daemon_unreachable (with the failure's code) and then engine.daemon_back, once each.
func TestAuditDaemonAwayAndBack(t *testing.T) {
	fwd := newDaemonSocket(t)
	t.Setenv("DOCKER_HOST", "unix://"+fwd.path)
	t.Setenv("DOCKER_CONTEXT", "")
	b, err := actors.Create(itest.Context(t), docker.Config{Labels: dockertest.Labels(), CommandTimeout: 5 * time.Second},
		actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	srv := natstest.Run(t)
	ev, err := events.New(itest.Context(t), natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(context.Background()) })
	itest.ServeObserved(t, srv, b, ev, service.WithDaemonProbe(100*time.Millisecond))
	nc := natstest.Connect(t, srv)
	subject := events.DefaultSubjectPrefix + ".audit._._.engine.>"

	fwd.down()
	away := readAudit(t, nc, events.DefaultSubjectPrefix+".audit._._.engine.daemon_unreachable", 1)
	var a events.AuditEvent
	if err := json.Unmarshal(away[0].Data(), &a); err != nil || a.Error != messages.CodeEngineUnavailable {
		t.Fatalf("daemon_unreachable: %s (%v), want error %s", away[0].Data(), err, messages.CodeEngineUnavailable)
	}
	fwd.up()
	readAudit(t, nc, events.DefaultSubjectPrefix+".audit._._.engine.daemon_back", 1)
	time.Sleep(500 * time.Millisecond) // five more probes: the state holds, nothing more is recorded
	var types []string
	for _, m := range readAudit(t, nc, subject, 3) {
		types = append(types, m.Subject()[strings.LastIndex(m.Subject(), ".engine.")+1:])
	}
	if want := []string{"engine.started", "engine.daemon_unreachable", "engine.daemon_back"}; !slices.Equal(types, want) {
		t.Errorf("the engine's events %v, want %v", types, want)
	}
}

// daemonSocket forwards a unix socket of the test's own to the Docker daemon's, and can be
// closed (every connection cut, new ones refused) and opened again on the same path.
type daemonSocket struct {
	t      *testing.T
	path   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	target string
}

func newDaemonSocket(t *testing.T) *daemonSocket {
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		target = strings.TrimPrefix(h, "unix://")
	}
	d := &daemonSocket{t: t, path: filepath.Join(t.TempDir(), "fwd.sock"), target: target}
	d.up()
	t.Cleanup(d.down)
	return d
}

func (d *daemonSocket) up() {
	ln, err := net.Listen("unix", d.path)
	if err != nil {
		d.t.Fatal(err)
	}
	d.mu.Lock()
	d.ln = ln
	d.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", d.target)
			if err != nil {
				c.Close()
				continue
			}
			d.mu.Lock()
			d.conns = append(d.conns, c, up)
			d.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// down closes the listener (removing the path, so connecting fails) and cuts every connection.
func (d *daemonSocket) down() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ln != nil {
		d.ln.Close()
		d.ln = nil
	}
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// TestAuditUntrustedInstanceReset runs two engines, one after the other's acquire, on the
// one daemon: the second finds the first's container under the key, which it never handed
// out, so its router resets it (the backend declares snapshot: protocol §8.3 step 7), a new
// instance from the spec's image under the key's name, the old one removed. The second
// engine's audit says so: outcome reset, the distrusted instance named, the new one served,
// and a sandbox.reset event from the one to the other.
func TestAuditUntrustedInstanceReset(t *testing.T) {
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t)
	first := &itest.NATSEngine{Server: natstest.Run(t), Backend: itest.NewBackend(t)}
	itest.ServeBackend(t, first.Server, first.Backend)
	old, err := first.Remote(t).Acquire(itest.Context(t), key, spec)
	if err != nil {
		t.Fatalf("first engine's acquire: %v", err)
	}

	second := &itest.NATSEngine{Server: natstest.Run(t), Backend: itest.NewBackend(t)}
	evNC := natstest.Connect(t, second.Server)
	ev, err := events.New(itest.Context(t), evNC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ev.Close(ctx)
	})
	itest.ServeObserved(t, second.Server, second.Backend, ev)
	sb := itest.AcquireRemote(t, second.Remote(t), second.Backend, key, spec)
	if sb.InstanceID() == old.InstanceID() {
		t.Fatalf("the second engine handed out the first's instance %s", old.InstanceID())
	}
	got := readAudit(t, evNC, events.DefaultSubjectPrefix+".audit."+events.Token(key.Scope)+".*.sandbox.acquired", 1)
	if len(got) != 1 {
		t.Fatalf("%d acquire events, want 1", len(got))
	}
	var a events.AuditEvent
	if err := json.Unmarshal(got[0].Data(), &a); err != nil {
		t.Fatal(err)
	}
	if a.Outcome != sandbox.OutcomeReset || a.Acquire == nil || a.Acquire.Untrusted != old.InstanceID() || a.InstanceID != sb.InstanceID() {
		t.Errorf("acquire event: %s\nwant outcome %s, untrusted %s, instance %s", got[0].Data(), sandbox.OutcomeReset, old.InstanceID(), sb.InstanceID())
	}
	resets := readAudit(t, evNC, events.DefaultSubjectPrefix+".audit."+events.Token(key.Scope)+".*.sandbox.reset", 1)
	var r events.AuditEvent
	if len(resets) != 1 || json.Unmarshal(resets[0].Data(), &r) != nil || r.InstanceID != sb.InstanceID() || r.Error != "" ||
		r.Lifecycle == nil || r.Lifecycle.Replaced != old.InstanceID() {
		t.Errorf("%d reset events (%+v); want one from instance %s to %s", len(resets), r, old.InstanceID(), sb.InstanceID())
	}
	if _, _, err := dockertest.DockerErr(itest.Context(t), "inspect", old.InstanceID()); err == nil {
		t.Errorf("the distrusted instance %s outlived its reset", old.InstanceID())
	}
}

// TestAuditOneRequestIDManyActs: a host that sets one request ID per agent turn
// (client.ContextWithRequestID) makes nine calls with it — two acquires, three execs, two
// writes, two disposes, all answered ok — and the audit stream keeps nine events, each with an
// ID of its own and that one request ID: the request ID correlates, it does not identify.
func TestAuditOneRequestIDManyActs(t *testing.T) {
	srv := natstest.Run(t)
	evNC := natstest.Connect(t, srv)
	ev, err := events.New(itest.Context(t), evNC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ev.Close(ctx)
	})
	e := &itest.NATSEngine{Server: srv, Backend: itest.NewBackend(t)}
	itest.ServeObserved(t, srv, e.Backend, ev)
	c := e.Remote(t)
	key := itest.NewKey(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := e.Backend.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", key, f)
		}
	})
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn))
	const turn = "agent-turn-7"
	ctx := client.ContextWithRequestID(itest.Context(t), turn)

	var sb sandbox.Sandbox
	for i := range 2 {
		if sb, err = c.Acquire(ctx, key, spec); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	for i := range 3 {
		if res, err := sb.Exec(ctx, sandbox.Argv("echo", fmt.Sprint(i)), ".", time.Minute); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %d: %+v, %v", i, res, err)
		}
	}
	for i := range 2 {
		if err := sb.WriteFile(ctx, fmt.Sprintf("f%d.txt", i), []byte("x"), "."); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for i := range 2 {
		if f := c.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Fatalf("dispose %d: %v", i, f)
		}
	}
	// Every event is handed to the stream before the count is read: what the stream holds
	// then is what it kept.
	waitUntil(t, "the nine acts' events and engine.started delivered", func() bool {
		st := ev.AuditStats()
		return st.Pending == 0 && st.Delivered >= 10
	})
	got := fetchAllNow(t, evNC, events.DefaultSubjectPrefix+".audit."+events.Token(key.Scope)+".>")
	ids := map[string]bool{}
	byType := map[string]int{}
	for _, m := range got {
		var a events.AuditEvent
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatal(err)
		}
		if a.RequestID != turn || a.Outcome == sandbox.OutcomeRefused {
			t.Errorf("event %s: request %q outcome %s, want %s and served", a.Type, a.RequestID, a.Outcome, turn)
		}
		ids[a.ID] = true
		byType[a.Type]++
	}
	want := map[string]int{events.AuditSandboxAcquired: 2, events.AuditExecFinished: 3, events.AuditFileWritten: 2, events.AuditSandboxDisposed: 2}
	if len(got) != 9 || len(ids) != 9 || !maps.Equal(byType, want) {
		t.Fatalf("the stream kept %d events with %d distinct IDs, by type %v; want 9, each its own ID, %v", len(got), len(ids), byType, want)
	}
}

// fetchAllNow reads every event the audit stream holds on filter now.
func fetchAllNow(t *testing.T, nc *nats.Conn, filter string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(itest.Context(t), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, events.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	return fetchAll(ctx, t, st, filter)
}
