package main

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/internal/execwire"
)

// sink collects what a pump sends.
type sink struct {
	mu  sync.Mutex
	got bytes.Buffer
}

func (s *sink) send(typ byte, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ != execwire.Stdout {
		panic("wrong frame type")
	}
	s.got.Write(p)
	return nil
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

// TestPumpSendsWhatThePipeHeldAtTheCut: a pump cut before it read anything (its engine was
// slow, the grace ran out) still sends what the command wrote, though a read past its
// deadline reads nothing; then it keeps the pipe read, so the process holding it open can go
// on writing, and ends when that process closes it.
func TestPumpSendsWhatThePipeHeldAtTheCut(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("written before the exit\n"); err != nil {
		t.Fatal(err)
	}
	o := &output{f: r, typ: execwire.Stdout}
	o.cut() // before the first read: that read fails at once
	var s sink
	done := make(chan struct{}, 1)
	ended := make(chan struct{})
	go func() {
		o.pump(s.send, done)
		close(ended)
	}()
	<-done
	if got := s.String(); got != "written before the exit\n" {
		t.Fatalf("the pump sent %q after the cut; want what the pipe held", got)
	}
	// The holder writes far more than a pipe holds: only a pump that reads on lets it finish.
	if _, err := w.Write(make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	<-ended
	if got := s.String(); got != "written before the exit\n" {
		t.Fatalf("the pump sent %d bytes after its cut; want none", len(got))
	}
}

// TestPumpSendsUntilThePipeCloses: without a cut, everything written is sent and the pump
// ends at the pipe's end.
func TestPumpSendsUntilThePipeCloses(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, several reads
	go func() {
		_, _ = w.Write(want)
		w.Close()
	}()
	var s sink
	done := make(chan struct{}, 1)
	(&output{f: r, typ: execwire.Stdout}).pump(s.send, done)
	<-done
	if got := s.String(); got != string(want) {
		t.Fatalf("the pump sent %d bytes; want %d", len(got), len(want))
	}
}
