package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// pipeGrace is how long a stopped child's stderr and a leftover pipe holder are waited for.
const pipeGrace = 3 * time.Second

// invocation is one run of the client.
type invocation struct {
	args    []string
	stdin   []byte        // nil: the null device
	env     []string      // K=V added to the client's environment (values kept off its command line)
	timeout time.Duration // > 0: the invocation's own budget, reported as *TimeoutError
	// readLimit > 0 keeps at most this many stdout bytes; reaching it stops the child.
	readLimit int
	// consume, when set, reads stdout itself; if it returns before EOF the child is stopped.
	consume func(io.Reader) error
	// maxOutput > 0 is the budget of stdout and stderr together.
	maxOutput int64
	// output, when set, sees each piece of stdout (1) and stderr (2) as it is read, within
	// maxOutput; the runner collects both readers before it returns.
	output func(stream int, p []byte)
}

// result is what the client returned. When Stopped, the runner killed the child after it had
// read what it needed, and ExitCode means nothing.
type result struct {
	ExitCode   int
	Stdout     []byte // with consume set: nil
	Stderr     []byte
	StdoutRead int64 // bytes read from stdout, whoever read them
	Stopped    bool
}

// run invokes the bound client: argv is the binary, the bound context, then inv.args.
func (c *cliDriver) run(ctx context.Context, inv invocation) (result, error) {
	b, err := c.ensureBound(ctx)
	if err != nil {
		return result{}, err
	}
	return c.runWith(ctx, b, inv)
}

// child is one started client process.
type child struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	reaping bool
	waited  chan error
}

// kill stops the child and its process group. Before the child is being reaped its pid cannot
// have been reused, so the whole group is signalled; after that only the process itself is,
// through its handle.
func (ch *child) kill() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.reaping {
		_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = ch.cmd.Process.Kill()
}

// reap starts waiting for the child (once).
func (ch *child) reap() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.reaping {
		return
	}
	ch.reaping = true
	go func() { ch.waited <- ch.cmd.Wait() }()
}

type readOutcome struct {
	data []byte
	err  error
}

// runWith runs inv on the client of b and waits for the first of: the child's exit (both pipes
// at EOF and the child reaped), stdout's reader done early (the child is stopped), the output
// budget spent, inv.timeout, or ctx's end.
func (c *cliDriver) runWith(ctx context.Context, b *bound, inv invocation) (res result, err error) {
	if inv.maxOutput > 0 && (inv.stdin != nil || inv.readLimit > 0 || inv.consume != nil) {
		panic("docker: maxOutput is exclusive with stdin, readLimit and consume")
	}
	op := "docker"
	if len(inv.args) > 0 {
		op = inv.args[0]
	}
	if err := ctx.Err(); err != nil {
		return result{}, fmt.Errorf("docker %s: %w", op, err)
	}
	ctx, end := c.inst.begin(ctx, op)
	defer func() {
		elapsed := end(err)
		c.log.Debug("docker command", zap.String("op", op), zap.Strings("args", firstArgs(inv.args)),
			zap.Int("exit_code", res.ExitCode), zap.Duration("elapsed", elapsed), zap.Error(err))
	}()

	r, err := spawn(b, inv, op)
	if err != nil {
		return result{}, err
	}
	r.collect(inv)

	var timer <-chan time.Time
	if inv.timeout > 0 {
		t := time.NewTimer(inv.timeout)
		defer t.Stop()
		timer = t.C
	}
	return r.end(ctx, timer, inv, op, r.await(ctx, timer))
}

// runEnd is what ended a run.
type runEnd int

const (
	runUndecided runEnd = iota
	runExited           // both pipes reached EOF
	runStopped          // stdout's reader is done before EOF
	runOverBudget
	runTimedOut
	runCancelled
)

// abnormalEnd is the end of a run whose timer or context fired.
func abnormalEnd(ctx context.Context) runEnd {
	if ctx.Err() != nil {
		return runCancelled
	}
	return runTimedOut
}

// running is one started client process with its two output pipes and their readers.
type running struct {
	ch         *child
	outR, errR *os.File
	outTrack   *trackReader
	outDone    chan readOutcome
	errDone    chan readOutcome
	out, serr  *readOutcome // set once each reader is collected
}

// spawn starts the client for inv with its stdout and stderr on fresh pipes, in its own
// process group.
func spawn(b *bound, inv invocation, op string) (*running, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("docker %s: stdout pipe: %w", op, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("docker %s: stderr pipe: %w", op, err)
	}
	argv := append(append([]string(nil), b.contextArgs...), inv.args...)
	cmd := exec.Command(b.bin, argv...)
	cmd.Env = b.env
	if len(inv.env) > 0 {
		base := b.env
		if base == nil {
			base = os.Environ() // what a nil Env would have given the child
		}
		cmd.Env = append(append([]string(nil), base...), inv.env...)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if inv.stdin != nil {
		cmd.Stdin = bytes.NewReader(inv.stdin)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w: %w: %q could not be started (%v); set Config.DockerPath to the Docker CLI binary",
				ErrUnreachable, ErrClientNotFound, b.bin, err)
		}
		return nil, fmt.Errorf("%w: start docker %s: %w", ErrUnreachable, op, err)
	}
	outW.Close()
	errW.Close()
	return &running{ch: &child{cmd: cmd, waited: make(chan error, 1)}, outR: outR, errR: errR}, nil
}

// collect starts the readers of stdout (as inv asks) and stderr (all of it), under inv's
// output budget and tap.
func (r *running) collect(inv invocation) {
	var budget *outputBudget
	if inv.maxOutput > 0 {
		budget = &outputBudget{max: inv.maxOutput}
	}
	r.outTrack = &trackReader{r: tap(budget.wrap(r.outR), StreamStdout, inv.output)}
	r.outDone = make(chan readOutcome, 1)
	r.errDone = make(chan readOutcome, 1)
	go func() {
		data, err := readStdout(r.outTrack, inv)
		r.outDone <- readOutcome{data, err}
	}()
	go func() {
		data, err := io.ReadAll(tap(budget.wrap(r.errR), StreamStderr, inv.output))
		r.errDone <- readOutcome{data, err}
	}()
}

// await waits until the run's end is decided.
func (r *running) await(ctx context.Context, timer <-chan time.Time) runEnd {
	d := runUndecided
	for d == runUndecided {
		select {
		case o := <-r.outDone:
			r.out = &o
			switch {
			case errors.Is(o.err, errOverBudget):
				d = runOverBudget
			case !r.outTrack.eof.Load():
				d = runStopped
			case r.serr != nil:
				d = runExited
			}
		case o := <-r.errDone:
			r.serr = &o
			switch {
			case errors.Is(o.err, errOverBudget):
				d = runOverBudget
			case r.out != nil:
				d = runExited
			}
		case <-timer:
			d = abnormalEnd(ctx)
		case <-ctx.Done():
			d = runCancelled
		}
	}
	return d
}

// end turns the decided end d into the run's answer: an exit waits for the child to be
// reaped (still under the timer and ctx), a stop keeps what stdout's reader read, anything
// else kills the child and is an error.
func (r *running) end(ctx context.Context, timer <-chan time.Time, inv invocation, op string, d runEnd) (result, error) {
	switch d {
	case runExited:
		if d = r.awaitExit(ctx, timer); d == runExited {
			_ = r.finish(false)
			return result{ExitCode: r.ch.cmd.ProcessState.ExitCode(), Stdout: r.out.data, Stderr: r.serr.data, StdoutRead: r.outTrack.n.Load()}, nil
		}
	case runStopped:
		return r.stop(ctx, timer), nil
	}
	_ = r.finish(true)
	switch d {
	case runOverBudget:
		return result{}, &OutputLimitError{Limit: inv.maxOutput}
	case runTimedOut:
		return result{}, &TimeoutError{Args: inv.args, Timeout: inv.timeout}
	}
	return result{}, fmt.Errorf("docker %s: %w", op, ctx.Err())
}

// awaitExit reaps a child whose pipes both reached EOF, unless the timer or ctx fires first.
func (r *running) awaitExit(ctx context.Context, timer <-chan time.Time) runEnd {
	r.ch.reap()
	select {
	case <-r.ch.waited:
		r.ch.waited <- nil // finish reads it again
		return runExited
	case <-timer:
		return abnormalEnd(ctx)
	case <-ctx.Done():
		return runCancelled
	}
}

// stop kills a child whose stdout reader is done early, gives its stderr pipeGrace to drain,
// and returns what was read.
func (r *running) stop(ctx context.Context, timer <-chan time.Time) result {
	r.ch.kill()
	r.outR.Close()
	grace := time.NewTimer(pipeGrace)
	select {
	case o := <-r.errDone:
		r.serr = &o
	case <-grace.C:
	case <-timer:
	case <-ctx.Done():
	}
	grace.Stop()
	_ = r.finish(false)
	return result{ExitCode: -1, Stdout: r.out.data, Stderr: r.serr.data, StdoutRead: r.outTrack.n.Load(), Stopped: true}
}

// finish kills the child unless it exited on its own, closes both pipes so no reader can
// block, collects the readers and reaps the child.
func (r *running) finish(kill bool) error {
	if kill {
		r.ch.kill()
	}
	r.outR.Close()
	r.errR.Close()
	if r.out == nil {
		o := <-r.outDone
		r.out = &o
	}
	if r.serr == nil {
		o := <-r.errDone
		r.serr = &o
	}
	r.ch.reap()
	return <-r.ch.waited
}

// readStdout reads the child's stdout the way inv asks.
func readStdout(r io.Reader, inv invocation) ([]byte, error) {
	if inv.consume != nil {
		return nil, inv.consume(r)
	}
	if inv.readLimit > 0 {
		buf := make([]byte, inv.readLimit)
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = nil
		}
		return buf[:n], err
	}
	return io.ReadAll(r)
}

// trackReader counts bytes and notes whether the stream reached EOF.
type trackReader struct {
	r   io.Reader
	n   atomic.Int64
	eof atomic.Bool
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n.Add(int64(n))
	if errors.Is(err, io.EOF) {
		t.eof.Store(true)
	}
	return n, err
}

// tap hands what r reads to output (nil: r itself), leaving out a read that overran the
// output budget.
func tap(r io.Reader, stream int, output func(int, []byte)) io.Reader {
	if output == nil {
		return r
	}
	return tapReader{r: r, stream: stream, output: output}
}

type tapReader struct {
	r      io.Reader
	stream int
	output func(int, []byte)
}

func (t tapReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && !errors.Is(err, errOverBudget) {
		t.output(t.stream, p[:n])
	}
	return n, err
}

// fail builds the error of a non-zero answer to args about target.
func fail(args []string, target string, res result) error {
	return failure(args, target, res)
}

func failure(args []string, target string, res result) *CommandError {
	return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: classify(args, target, res.Stderr)}
}

// control runs a short control command under Config.CommandTimeout.
func (c *cliDriver) control(ctx context.Context, args ...string) (result, error) {
	return c.run(ctx, invocation{args: args, timeout: c.cfg.CommandTimeout})
}
