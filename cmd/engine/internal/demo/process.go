package demo

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/sandbox"
)

// processStep: a background process writes a line every 200 ms; a reader follows it, its
// connection goes, and a reader that connects again resumes from the sequence it had reached
// and reads the rest from JetStream, every line once; the process's end is the stream's.
func processStep(ctx context.Context, step func(string, ...any), url string, sb sandbox.Sandbox, key sandbox.Key, spec sandbox.Spec) error {
	pr, ok := sb.(sandbox.ProcessRunner)
	if !ok {
		return fmt.Errorf("the sandbox runs no processes")
	}
	const lines = 20
	p, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "ticker",
		Command: sandbox.Shell(fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo tick $i; i=$((i+1)); sleep 0.2; done", lines))})
	if err != nil {
		return err
	}
	step("started background process %q (pid %d in the sandbox, %s, durable %t): a line every 200 ms", p.ID, p.PID, p.Transport, p.Durable)
	// The first reader, on a connection of its own, reads until tick 5 and goes.
	first, err := nats.Connect(url, nats.Name("demo-reader-1"))
	if err != nil {
		return err
	}
	reader, err := readerSandbox(ctx, first, key, spec)
	if err != nil {
		first.Close()
		return err
	}
	var got bytes.Buffer
	seq := int64(0)
	for !strings.Contains(got.String(), "tick 5\n") {
		out, err := reader.ReadProcessOutput(ctx, p.ID, seq, sandbox.ReadOptions{Wait: 5 * time.Second})
		if err != nil {
			first.Close()
			return err
		}
		for _, c := range out.Chunks {
			got.Write(c.Data)
		}
		seq = out.Next
	}
	first.Close()
	step("reader 1 read %d bytes (%d lines) and disconnected at sequence %d", got.Len(), strings.Count(got.String(), "\n"), seq)
	time.Sleep(time.Second) // the process writes on while nobody reads
	second, err := nats.Connect(url, nats.Name("demo-reader-2"))
	if err != nil {
		return err
	}
	defer second.Close()
	if reader, err = readerSandbox(ctx, second, key, spec); err != nil {
		return err
	}
	exit, err := client.FollowProcess(ctx, reader, p.ID, seq, 5*time.Second, func(c sandbox.OutputChunk) { got.Write(c.Data) },
		func(c sandbox.OutputCut) {
			step("cut: %d bytes from %d no longer held (%s)", c.Bytes(), c.From, c.Reason)
		})
	if err != nil {
		return err
	}
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "tick %d\n", i)
	}
	whole := got.String() == want.String()
	step("reader 2 reconnected, resumed at sequence %d and read to the end: %d lines in all, every one once: %t; the process %s %d",
		seq, strings.Count(got.String(), "\n"), whole, exit.Reason, exit.ExitCode)
	if !whole {
		return fmt.Errorf("the resumed read gave %q", got.String())
	}
	return nil
}

// readerSandbox is the sandbox of key as a client on nc sees it (a warm acquire: the same one).
func readerSandbox(ctx context.Context, nc *nats.Conn, key sandbox.Key, spec sandbox.Spec) (*client.Sandbox, error) {
	c, err := client.New(ctx, nc)
	if err != nil {
		return nil, err
	}
	sb, err := c.Acquire(ctx, key, spec)
	if err != nil {
		return nil, err
	}
	return sb.(*client.Sandbox), nil
}
