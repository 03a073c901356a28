package events

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

var testRef = sandbox.ProcessRef{Key: sandbox.Key{Scope: "tenant-1", ThreadID: "t", AgentID: "a"}, Kind: "shell",
	Instance: "44f2dccf9201c9fd8ffc173385566ecb0972a1f219a1ff08b037f95ad58a1999", ID: "web"}

func newStreams(t *testing.T, opts ...ProcessOpt) *ProcessStreams {
	t.Helper()
	srv := runNATS(t, -1, t.TempDir())
	p, err := NewProcessStreams(connect(t, srv.ClientURL()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// store stores data as output records of the given sizes from seq on.
func store(t *testing.T, p *ProcessStreams, ref sandbox.ProcessRef, seq int64, data []byte, sizes func() int) {
	t.Helper()
	for len(data) > 0 {
		n := min(sizes(), len(data))
		if err := p.ProcessOutput(t.Context(), ref, sandbox.OutputChunk{Seq: seq, Stream: sandbox.StreamStdout, Data: data[:n]}, nil); err != nil {
			t.Fatal(err)
		}
		seq += int64(n)
		data = data[n:]
	}
}

// readFrom reads ref from seq to its end, maxBytes at a time.
func readFrom(t *testing.T, p *ProcessStreams, ref sandbox.ProcessRef, seq, maxBytes int64) ([]byte, []sandbox.OutputCut, *sandbox.ProcessExit) {
	t.Helper()
	var out []byte
	var cuts []sandbox.OutputCut
	for {
		r, err := p.ReadProcessOutput(t.Context(), ref, seq, sandbox.ReadOptions{MaxBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		if r.Cut != nil {
			if r.Cut.From != seq {
				t.Fatalf("a cut from %d, read at %d", r.Cut.From, seq)
			}
			cuts = append(cuts, *r.Cut)
			seq = r.Cut.To
		}
		for _, c := range r.Chunks {
			if c.Seq != seq {
				t.Fatalf("chunk at %d, want %d", c.Seq, seq)
			}
			out = append(out, c.Data...)
			seq = c.End()
		}
		if r.Next != seq {
			t.Fatalf("next %d, want %d", r.Next, seq)
		}
		if r.Exit != nil || (len(r.Chunks) == 0 && r.Cut == nil) {
			return out, cuts, r.Exit
		}
	}
}

func TestProcessOutputReadFromAnySequence(t *testing.T) {
	p := newStreams(t)
	data := make([]byte, 300_000)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	if err := p.ProcessStarted(t.Context(), testRef, sandbox.Process{ID: "web", Argv: []string{"server"}, Transport: sandbox.TransportSupervisor, Durable: true}, nil); err != nil {
		t.Fatal(err)
	}
	store(t, p, testRef, 0, data, func() int { return 1 + rand.IntN(20_000) })
	exit := sandbox.Process{ID: "web", State: sandbox.ProcessStateExited, Output: int64(len(data)), Exit: &sandbox.ProcessExit{Reason: sandbox.ExitExited, ExitCode: 3}}
	if err := p.ProcessExited(t.Context(), testRef, exit, nil); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 1, 12_345, 299_999, 300_000} {
		got, cuts, e := readFrom(t, p, testRef, from, 64<<10)
		if !bytes.Equal(got, data[from:]) || len(cuts) != 0 || e == nil || e.ExitCode != 3 {
			t.Fatalf("from %d: %d bytes, cuts %v, exit %+v", from, len(got), cuts, e)
		}
	}
	next, ended, err := p.ProcessResume(t.Context(), testRef)
	if err != nil || next != 300_000 || !ended {
		t.Fatalf("resume: %d %v %v", next, ended, err)
	}
	other := testRef
	other.ID = "nobody"
	if _, err := p.ReadProcessOutput(t.Context(), other, 0, sandbox.ReadOptions{}); !errors.As(err, new(*sandbox.ProcessNotFoundError)) {
		t.Fatalf("a process with nothing stored: %v", err)
	}
}

// Records stored twice (an acknowledgement lost and the record published again) or
// overlapping (another engine followed the process again with other boundaries) reach the
// reader once: the stream keeps one of a repeat, and the reader trims what it has.
func TestProcessOutputRepeatsReachTheReaderOnce(t *testing.T) {
	p := newStreams(t)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	store(t, p, testRef, 0, data[:5000], func() int { return 1000 })
	store(t, p, testRef, 4000, data[4000:6000], func() int { return 1000 }) // a repeat of 4000..5000, then new
	store(t, p, testRef, 5500, data[5500:], func() int { return 700 })      // overlapping other boundaries
	got, cuts, _ := readFrom(t, p, testRef, 0, 1500)
	if !bytes.Equal(got, data) || len(cuts) != 0 {
		t.Fatalf("%d bytes, cuts %v", len(got), cuts)
	}
}

// A cut record, and output the retention purged, reach the reader as cuts that say where and
// how much.
func TestProcessOutputCutsAreTold(t *testing.T) {
	p := newStreams(t, WithProcessRetention(10_000, 0))
	data := bytes.Repeat([]byte("x"), 1000)
	store(t, p, testRef, 0, data, func() int { return 500 })
	if err := p.ProcessCut(t.Context(), testRef, sandbox.OutputCut{From: 1000, To: 3000, Reason: "buffer"}, nil); err != nil {
		t.Fatal(err)
	}
	store(t, p, testRef, 3000, data, func() int { return 500 })
	got, cuts, _ := readFrom(t, p, testRef, 0, 1<<20)
	if len(got) != 2000 || len(cuts) != 1 || cuts[0] != (sandbox.OutputCut{From: 1000, To: 3000, Reason: "buffer"}) {
		t.Fatalf("%d bytes, cuts %v", len(got), cuts)
	}
	// Past the retention of 10,000 bytes the oldest are purged: a reader from 0 is told.
	store(t, p, testRef, 4000, bytes.Repeat([]byte("y"), 40_000), func() int { return 1000 })
	got, cuts, _ = readFrom(t, p, testRef, 0, 1<<20)
	if len(cuts) != 1 || cuts[0].From != 0 || cuts[0].Reason != "retention" || cuts[0].To < 44_000-12_500 || cuts[0].To+int64(len(got)) != 44_000 {
		t.Fatalf("after the retention: %d bytes, cuts %v", len(got), cuts)
	}
}

// A read with a wait returns as soon as a record is stored.
func TestProcessOutputReadWaits(t *testing.T) {
	p := newStreams(t)
	store(t, p, testRef, 0, []byte("first"), func() int { return 5 })
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = p.ProcessOutput(context.Background(), testRef, sandbox.OutputChunk{Seq: 5, Stream: sandbox.StreamStderr, Data: []byte("second")}, nil)
	}()
	start := time.Now()
	r, err := p.ReadProcessOutput(t.Context(), testRef, 5, sandbox.ReadOptions{Wait: 30 * time.Second})
	if err != nil || len(r.Chunks) != 1 || string(r.Chunks[0].Data) != "second" || r.Chunks[0].Stream != sandbox.StreamStderr {
		t.Fatalf("%+v %v", r, err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the read waited out its wait")
	}
}

func TestProcessRecords(t *testing.T) {
	p := newStreams(t)
	running := testRef
	running.ID = "running"
	if err := p.ProcessStarted(t.Context(), running, sandbox.Process{ID: "running", Argv: []string{"sleep", "1"}, Transport: sandbox.TransportDockerExec}, nil); err != nil {
		t.Fatal(err)
	}
	store(t, p, running, 0, []byte("abc"), func() int { return 3 })
	ended := testRef
	ended.ID = "ended"
	_ = p.ProcessExited(t.Context(), ended, sandbox.Process{ID: "ended", Exit: &sandbox.ProcessExit{Reason: sandbox.ExitSignalled, Signal: sandbox.SIGTERM}}, nil)
	ps, err := p.ProcessRecords(t.Context(), testRef.Key, testRef.Kind, testRef.Instance)
	if err != nil || len(ps) != 2 {
		t.Fatalf("%+v %v", ps, err)
	}
	for _, proc := range ps {
		switch proc.ID {
		case "running":
			if proc.Exit != nil || proc.Output != 3 || proc.Transport != sandbox.TransportDockerExec || proc.Argv[0] != "sleep" {
				t.Errorf("running: %+v", proc)
			}
		case "ended":
			if proc.Exit == nil || proc.Exit.Reason != sandbox.ExitSignalled {
				t.Errorf("ended: %+v", proc)
			}
		}
	}
}
