package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// storeBackend is a backend with the supervisor whose processes' output goes to JetStream
// over nc.
func storeBackend(t *testing.T, nc *nats.Conn, opts ...events.ProcessOpt) (*actors.Backend, *events.ProcessStreams) {
	t.Helper()
	streams, err := events.NewProcessStreams(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return channelBackend(t, actors.WithProcessStore(streams)), streams
}

// writerCommand writes n numbered lines tagged tag, pausing every 400 lines.
func writerCommand(tag string, n int) string {
	return fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo %s-$i; i=$((i+1)); [ $((i %% 400)) = 0 ] && sleep 0.1; done; true", n, tag)
}

func writerOutput(tag string, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "%s-%d\n", tag, i)
	}
	return b.Bytes()
}

// storedOutput is every output record of subject as the stream holds it, checked contiguous:
// each record starts where the previous ended, so nothing is stored twice.
func storedOutput(t *testing.T, nc *nats.Conn, subject string) []byte {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.OrderedConsumer(t.Context(), events.StreamProcess, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for range info.NumPending {
		m, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if m.Headers().Get(events.HeaderProcessRecord) != events.RecordOutput {
			continue
		}
		seq, _ := strconv.ParseInt(m.Headers().Get(events.HeaderProcessSeq), 10, 64)
		if seq != int64(len(out)) {
			t.Fatalf("%s: a record at %d after %d bytes: stored twice or with a hole", subject, seq, len(out))
		}
		out = append(out, m.Data()...)
	}
	return out
}

// TestProcessOutputSurvivesItsEngine: an engine stops while three processes write; a second
// engine adopting the sandbox follows them again from where the stream's records end, and
// every byte is in the stream once, in order, read from sequence 0.
func TestProcessOutputSurvivesItsEngine(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	first, streams := storeBackend(t, nc)
	key := itest.NewKey(t)
	got, err := first.Acquire(itest.Context(t), key, itest.BusyboxSpec(t)) // the second engine disposes it
	if err != nil {
		t.Fatal(err)
	}
	sb := got.(*actors.Sandbox)
	const lines = 4000
	for i := range 3 {
		start(t, sb, sandbox.ProcessSpec{ID: fmt.Sprintf("w%d", i), Command: sandbox.Shell(writerCommand(fmt.Sprintf("w%d", i), lines))})
	}
	waitOutput(t, sb, "w0", "w0-500\n") // stored: the first engine is mid-stream
	first.Close(itest.Context(t))

	second, _ := storeBackend(t, nc)
	sb2 := itest.Acquire(t, second, key, itest.BusyboxSpec(t)).(*actors.Sandbox)
	for i := range 3 {
		id := fmt.Sprintf("w%d", i)
		if p := wait(t, sb2, id); p.Exit == nil || p.Exit.ExitCode != 0 {
			t.Fatalf("%s: %+v", id, p)
		}
		want := writerOutput(id, lines)
		out, cut, exit := readAll(t, sb2, id, 0, 64<<10)
		if cut != nil || exit == nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: read %d bytes, want %d; cut %v, exit %+v", id, len(out), len(want), cut, exit)
		}
		if stored := storedOutput(t, nc, streams.Subject(sb2.ProcessRef(id))); !bytes.Equal(stored, want) {
			t.Fatalf("%s: the stream holds %d bytes, want %d", id, len(stored), len(want))
		}
	}
}

// TestProcessOutputThroughANATSOutage: NATS goes away while a process writes and comes back;
// the output waits in the supervisor meanwhile and is stored once NATS is back, every byte.
func TestProcessOutputThroughANATSOutage(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.RunWithOptions(t, natstest.Options(dir))
	port := srv.Addr().(interface{ String() string }).String()
	nc := natstest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	b, _ := storeBackend(t, nc)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t)).(*actors.Sandbox)
	const lines = 6000
	start(t, sb, sandbox.ProcessSpec{ID: "w", Command: sandbox.Shell(writerCommand("w", lines))})
	waitOutput(t, sb, "w", "w-100\n")
	srv.Shutdown()
	srv.WaitForShutdown()
	time.Sleep(time.Second) // NATS away while the process writes on
	opts := natstest.Options(dir)
	opts.Port = portOf(t, port)
	natstest.RunWithOptions(t, opts)
	if p := wait(t, sb, "w"); p.Exit == nil || p.Exit.ExitCode != 0 {
		t.Fatalf("%+v", p)
	}
	out, cut, _ := readAll(t, sb, "w", 0, 1<<20)
	if want := writerOutput("w", lines); cut != nil || !bytes.Equal(out, want) {
		t.Fatalf("read %d bytes, want %d; cut %v", len(out), len(want), cut)
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	n, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProcessRetentionIsTold: a process that keeps only its last 64 KiB loses the rest, and
// a reader from sequence 0 is told where and how much before it reads the tail.
func TestProcessRetentionIsTold(t *testing.T) {
	srv := natstest.Run(t)
	b, _ := storeBackend(t, natstest.Connect(t, srv))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t)).(*actors.Sandbox)
	const total, keep = 1 << 20, 64 << 10
	start(t, sb, sandbox.ProcessSpec{ID: "flood", Command: sandbox.Shell(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", total)),
		Retention: &sandbox.OutputRetention{Bytes: keep}})
	wait(t, sb, "flood")
	out, cut, exit := readAll(t, sb, "flood", 0, 1<<20)
	if cut == nil || cut.From != 0 || cut.To+int64(len(out)) != total || len(out) < keep || exit == nil {
		t.Fatalf("cut %+v, %d bytes, exit %+v", cut, len(out), exit)
	}
	if _, err := sb.StartProcess(itest.Context(t), sandbox.ProcessSpec{Command: sandbox.Argv("true"),
		Retention: &sandbox.OutputRetention{Age: events.DefaultProcessRetentionAge + time.Hour}}); !errors.As(err, new(*sandbox.ProcessLimitError)) {
		t.Fatalf("a retention above the engine's: %v", err)
	}
}

// TestDockerExecProcessIsLostAfterItsEngine: a docker exec process is the engine's to follow;
// after that engine stops, another that adopts the sandbox reports it lost, never running,
// and stores its end so.
func TestDockerExecProcessIsLostAfterItsEngine(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	image := itest.DerivedImage(t, "true", `ENTRYPOINT ["/bin/sh", "-c", "exec \"$@\"", "entry"]`)
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.Processes))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := storeBackend(t, nc)
	key := itest.NewKey(t)
	got, err := first.Acquire(itest.Context(t), key, spec)
	if err != nil {
		t.Fatal(err)
	}
	sb := got.(*actors.Sandbox)
	start(t, sb, sandbox.ProcessSpec{ID: "de", Command: sandbox.Shell("echo up; sleep 300")})
	waitOutput(t, sb, "de", "up\n")
	first.Close(context.Background())

	second, _ := storeBackend(t, nc)
	sb2 := itest.Acquire(t, second, key, spec).(*actors.Sandbox)
	ps, err := sb2.ListProcesses(itest.Context(t))
	if err != nil || len(ps) != 1 || ps[0].ID != "de" || ps[0].Exit == nil || ps[0].Exit.Reason != sandbox.ExitLost {
		t.Fatalf("the second engine lists %+v, %v", ps, err)
	}
	out, _, exit := readAll(t, sb2, "de", 0, 1<<20)
	if string(out) != "up\n" || exit == nil || exit.Reason != sandbox.ExitLost {
		t.Fatalf("read %q, exit %+v", out, exit)
	}
}

// TestProcessOutputRate: one process's output is stored at most at the backend's output rate;
// a process that writes faster is held back by its supervisor (its writes wait), and loses
// nothing. At 1 MiB/s, 3 MiB cannot be stored in less than two seconds (a lower bound: a slow
// machine only makes it slower).
func TestProcessOutputRate(t *testing.T) {
	srv := natstest.Run(t)
	streams, err := events.NewProcessStreams(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	b := channelBackend(t, actors.WithProcessStore(streams), actors.WithProcessLimits(actors.ProcessLimits{OutputRate: 1 << 20}))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t)).(*actors.Sandbox)
	const total = 3 << 20
	began := time.Now()
	start(t, sb, sandbox.ProcessSpec{ID: "fast", Command: sandbox.Shell(fmt.Sprintf("head -c %d /dev/zero", total))})
	wait(t, sb, "fast")
	if took := time.Since(began); took < 2*time.Second {
		t.Fatalf("3 MiB stored in %s, faster than 1 MiB/s", took)
	}
	out, cut, _ := readAll(t, sb, "fast", 0, 1<<20)
	if cut != nil || len(out) != total {
		t.Fatalf("%d bytes, cut %v", len(out), cut)
	}
}
