package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/sandbox"
)

// start is "engine run --detach": acquire the key's sandbox and keep it, copy the files in,
// start the command as a process, and print its ID and how to reach it again.
func (v *runVerb) start(ctx context.Context) error {
	if len(v.outputs) > 0 || len(v.allow) > 0 {
		return errors.New("run --detach: --output and --allow are for a one-shot run")
	}
	spec, err := processSpec(v.kind, v.image, v.workDir)
	if err != nil {
		return fmt.Errorf("run --detach: %w", err)
	}
	pspec := sandbox.ProcessSpec{ID: v.procID, Command: v.cmd, Env: v.env, WorkDir: ".", Stdin: v.stdin || v.tty, Timeout: 0}
	if v.tty {
		pspec.Terminal = &sandbox.TerminalSize{Rows: 24, Cols: 80}
		if ws, err := unix.IoctlGetWinsize(int(os.Stdin.Fd()), unix.TIOCGWINSZ); err == nil && ws.Row > 0 && ws.Col > 0 {
			pspec.Terminal = &sandbox.TerminalSize{Rows: ws.Row, Cols: ws.Col}
		}
	}
	if err := pspec.Validate(); err != nil {
		return fmt.Errorf("run --detach: %w", err)
	}
	inputs, err := readInputs(v.files)
	if err != nil {
		return err
	}
	log, err := v.logs.logger()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	nc, err := v.conn.connect("maf-sandbox engine run --detach", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := client.New(ctx, nc, client.WithPrefix(v.conn.prefix), client.WithLogger(log), client.WithCallTimeout(v.callTimeout))
	if err != nil {
		return fmt.Errorf("run --detach: %w", err)
	}
	key := v.key()
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		return fmt.Errorf("run --detach: acquire: %w", err)
	}
	for _, in := range inputs {
		if err := sb.WriteFile(ctx, in.guest, in.content, "."); err != nil {
			return fmt.Errorf("run --detach: copy %s in: %w", in.local, err)
		}
	}
	p, err := sb.(*client.Sandbox).StartProcess(ctx, pspec)
	if err != nil {
		return fmt.Errorf("run --detach: %w", err)
	}
	fmt.Println(p.ID)
	where := fmt.Sprintf("--scope %s --thread %s --agent %s --kind %s", key.Scope, key.ThreadID, key.AgentID, v.kind)
	if v.image != "" {
		where += " --image " + v.image
	}
	fmt.Fprintf(os.Stderr, "process %s started (%s); reach it with: engine logs|attach|kill %s %s\n", p.ID, p.Transport, where, p.ID)
	return nil
}
