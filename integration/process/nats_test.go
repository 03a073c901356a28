package process

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestProcessOverNATS: through the API and the Go client, a process is started with stdin,
// fed and closed; a reader that disconnects half way (its connection closed) and another
// client that joins later both resume from a sequence and together read every byte once,
// in order, through to the exit.
func TestProcessOverNATS(t *testing.T) {
	srv := natstest.Run(t)
	b, _ := storeBackend(t, natstest.Connect(t, srv))
	itest.ServeBackend(t, srv, b)
	newClient := func() (*client.Backend, *nats.Conn) {
		nc := natstest.Connect(t, srv)
		c, err := client.New(itest.Context(t), nc)
		if err != nil {
			t.Fatal(err)
		}
		return c, nc
	}
	key, spec := itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.Processes))
	c1, nc1 := newClient()
	first := itest.AcquireRemote(t, c1, b, key, spec).(*client.Sandbox)

	const lines = 3000
	p, err := first.StartProcess(itest.Context(t), sandbox.ProcessSpec{Command: sandbox.Shell(fmt.Sprintf("read go; %s; cat", writerCommand("w", lines))), Stdin: true})
	if err != nil || !p.Durable || p.ID == "" {
		t.Fatalf("start: %+v %v", p, err)
	}
	if err := first.WriteProcessStdin(itest.Context(t), p.ID, []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	// The first reader reads a little, then its connection goes.
	r, err := first.ReadProcessOutput(itest.Context(t), p.ID, 0, sandbox.ReadOptions{MaxBytes: 1000, Wait: 10 * time.Second})
	if err != nil || len(r.Chunks) == 0 {
		t.Fatalf("first read: %+v %v", r, err)
	}
	var got bytes.Buffer
	for _, c := range r.Chunks {
		got.Write(c.Data)
	}
	nc1.Close()
	if _, err := first.ReadProcessOutput(itest.Context(t), p.ID, r.Next, sandbox.ReadOptions{}); err == nil {
		t.Fatal("a read on a closed connection answered")
	}

	// Another client, joining later, resumes where the first stopped.
	c2, _ := newClient()
	second := itest.AcquireRemote(t, c2, b, key, spec).(*client.Sandbox)
	if err := second.WriteProcessStdin(itest.Context(t), p.ID, []byte("tail\n")); err != nil {
		t.Fatal(err)
	}
	if err := second.CloseProcessStdin(itest.Context(t), p.ID); err != nil {
		t.Fatal(err)
	}
	exit, err := client.FollowProcess(itest.Context(t), second, p.ID, r.Next, 10*time.Second,
		func(c sandbox.OutputChunk) { got.Write(c.Data) }, func(c sandbox.OutputCut) { t.Errorf("a cut %+v", c) })
	if err != nil || exit.Reason != sandbox.ExitExited || exit.ExitCode != 0 {
		t.Fatalf("follow: %+v %v", exit, err)
	}
	want := append(writerOutput("w", lines), "tail\n"...)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("read %d bytes, want %d", got.Len(), len(want))
	}
	ps, err := second.ListProcesses(itest.Context(t))
	if err != nil || len(ps) != 1 || ps[0].Exit == nil || ps[0].Output != int64(len(want)) {
		t.Fatalf("list: %+v %v", ps, err)
	}
	if err := second.SignalProcess(itest.Context(t), p.ID, sandbox.SIGTERM); !errorsAs[*sandbox.ProcessEndedError](err) {
		t.Fatalf("a signal after the end, over NATS: %v", err)
	}
}
