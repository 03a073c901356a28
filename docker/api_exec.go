package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// Exec implements [Containers] through exec create, a hijacked exec start that carries stdout and
// stderr multiplexed (demultiplexed here), and exec inspect for the exit code. Only ctx bounds
// it. A daemon answer refusing the exec (no such container, not running) is a result, exit 1
// with the daemon's message on stderr, as the client reports it; a 409 on a container that is
// paused is the frozen refusal, [ErrPaused] (the command never started). A daemon that cannot be
// reached is [ErrUnreachable].
func (a *Engine) Exec(ctx context.Context, req ExecRequest) (ExecOutput, error) {
	return a.exec(ctx, req, nil)
}

// ExecWithStart implements [Driver]: Exec, calling started once the engine reports the
// exec's process running (its pid is known), or the exec ended or was refused without a
// process. It polls exec inspect while the start is in flight: the daemon holds the exec's lock
// across runc's exec, so an inspect issued in that window answers only once it is closed.
func (a *Engine) ExecWithStart(ctx context.Context, req ExecRequest, started func()) (ExecOutput, error) {
	if started == nil {
		started = func() {}
	}
	return a.exec(ctx, req, started)
}

func (a *Engine) exec(ctx context.Context, req ExecRequest, started func()) (out ExecOutput, err error) {
	var once sync.Once
	signal := func() {
		if started != nil {
			once.Do(started)
		}
	}
	defer signal() // refused, failed or finished: nothing is left to race a freeze
	if err := req.check(); err != nil {
		return ExecOutput{}, err
	}
	args := append([]string{"exec"}, req.Target)
	args = append(args, req.Argv...)
	ctx, end := a.inst.begin(ctx, "exec")
	defer func() {
		elapsed := end(err)
		a.log.Debug("docker api exec", zap.String("container", req.Target), zap.Strings("args", firstArgs(req.Argv)),
			zap.Int("exit_code", out.ExitCode), zap.Duration("elapsed", elapsed), zap.Error(err))
	}()
	if err := ctx.Err(); err != nil {
		return ExecOutput{}, fmt.Errorf("docker exec: %w", err)
	}
	var b *apiBound
	if err := a.control(ctx, args, func(_ context.Context, bb *apiBound) error { b = bb; return nil }); err != nil {
		return ExecOutput{}, err
	}
	ctx, witness := withSSHWitness(ctx)
	defer func() {
		if ctx.Err() == nil {
			err = witness.settle("exec", err)
		}
	}()
	cancelled := func(err error) (ExecOutput, error) {
		if ctx.Err() != nil {
			return ExecOutput{}, fmt.Errorf("docker exec: %w", ctx.Err())
		}
		return ExecOutput{}, err
	}

	execID, conn, stream, refusal, err := b.openExecPatiently(ctx, args, req)
	if refusal != nil {
		return *refusal, err
	}
	if err != nil {
		return cancelled(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer conn.Close()

	var watch sync.WaitGroup
	streamDone := make(chan struct{})
	if started != nil {
		watch.Add(1)
		go func() {
			defer watch.Done()
			b.awaitStart(ctx, execID, streamDone)
			signal()
		}()
	}
	var budget *outputBudget
	if req.MaxOutputBytes > 0 {
		budget = &outputBudget{max: req.MaxOutputBytes}
	}
	var stdout, stderr bytes.Buffer
	_, cerr := stdcopy.StdCopy(budgetWriter{&stdout, budget, StreamStdout, req.Output, req.KeepOutput},
		budgetWriter{&stderr, budget, StreamStderr, req.Output, req.KeepOutput}, stream)
	close(streamDone)
	_ = conn.Close()
	watch.Wait()
	switch {
	case ctx.Err() != nil:
		return ExecOutput{}, fmt.Errorf("docker exec: %w", ctx.Err())
	case errors.Is(cerr, errOverBudget):
		return ExecOutput{}, &OutputLimitError{Limit: req.MaxOutputBytes}
	case cerr != nil:
		return ExecOutput{}, fmt.Errorf("%w: docker exec: the output stream broke: %w", ErrUnreachable, cerr)
	}
	code, pid, err := b.exitCode(ctx, execID)
	if err != nil {
		return cancelled(apiError([]string{"exec", "inspect", execID}, err, nil))
	}
	out = ExecOutput{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	// No process: the runtime's refusal, which the daemon wrote where the output goes.
	if msg, cause, ok := execStartFailure(code, out.Stdout, out.Stderr); ok && pid == 0 {
		return out, &ExecStartError{Args: args, Cause: cause, Message: msg, Output: out}
	}
	return out, nil
}

// openExecPatiently is openExec, asked again while the daemon refuses it as paused
// ([AskWhilePaused]: 20.10's late "paused" event after a thaw). The exec's started callback
// waits for it, so no freeze of the engine's begins meanwhile; a refusal that outlasts it is
// someone else's pause, answered as the daemon gave it.
func (b *apiBound) openExecPatiently(ctx context.Context, args []string, req ExecRequest) (id string, conn net.Conn, stream io.Reader, refusal *ExecOutput, err error) {
	err = AskWhilePaused(ctx, func() error {
		id, conn, stream, refusal, err = b.openExec(ctx, args, req)
		return err
	}, nil)
	if errors.Is(err, ErrPaused) && ctx.Err() != nil {
		return "", nil, nil, nil, ctx.Err()
	}
	return id, conn, stream, refusal, err
}

// openExec creates the exec and starts it attached. A refusal by the daemon comes back as the
// output the client makes of it (refused), with the error refused gives; any other failure as
// an error alone.
func (b *apiBound) openExec(ctx context.Context, args []string, req ExecRequest) (string, net.Conn, io.Reader, *ExecOutput, error) {
	created, err := b.client.ExecCreate(ctx, req.Target, client.ExecCreateOptions{
		User: req.User, WorkingDir: req.WorkDir, Env: req.Env, Cmd: req.Argv,
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		if !isAnswer(err) {
			return "", nil, nil, nil, apiError(args, err, nil)
		}
		out, err := b.refused(ctx, args, req.Target, err)
		return "", nil, nil, &out, err
	}
	conn, stream, err := b.startExec(ctx, created.ID)
	if err != nil {
		var ans *apiAnswer
		if !errors.As(err, &ans) {
			return "", nil, nil, nil, apiError(args, err, nil)
		}
		out, err := b.refused(ctx, args, req.Target, ans)
		return "", nil, nil, &out, err
	}
	return created.ID, conn, stream, nil, nil
}

// refused turns the daemon's refusal of an exec into what the client makes of it: exit 1 with
// the answer on stderr, and [ErrPaused] with it when the container it refused is paused (the
// daemon says so with a 409, which it also uses for "not running": the state decides).
func (b *apiBound) refused(ctx context.Context, args []string, target string, answer error) (ExecOutput, error) {
	out := ExecOutput{ExitCode: 1, Stderr: []byte(answer.Error() + "\n")}
	if !cerrdefs.IsNotFound(answer) {
		if info, err := b.inspect(ctx, target); err == nil && info.Paused {
			return out, &CommandError{Args: args, ExitCode: answerStatus(answer), Stderr: out.Stderr, Class: ErrPaused}
		}
	}
	return out, nil
}

// startExec starts the exec attached, on a connection of its own: POST /exec/{id}/start with
// an upgrade, then the raw multiplexed stream. The Moby client's ExecAttach drops a refused
// start's status and message, which is the one thing that tells a frozen refusal from the
// rest, so the request is written here. ctx ending closes the connection.
func (b *apiBound) startExec(ctx context.Context, execID string) (net.Conn, io.Reader, error) {
	conn, err := b.client.Dialer()(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: start exec: %w", ErrUnreachable, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	fail := func(err error) (net.Conn, io.Reader, error) {
		stop()
		_ = conn.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, err
	}
	body, _ := json.Marshal(map[string]bool{"Detach": false, "Tty": false})
	hreq, err := http.NewRequest(http.MethodPost, "http://"+b.host()+b.apiPath("/exec/"+execID+"/start"), bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", "tcp")
	if err := hreq.Write(conn); err != nil {
		return fail(fmt.Errorf("%w: start exec: %w", ErrUnreachable, err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		return fail(fmt.Errorf("%w: start exec: %w", ErrUnreachable, err))
	}
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode == http.StatusOK {
		stop()
		return conn, br, nil
	}
	ans := readAnswer(resp)
	_ = resp.Body.Close()
	return fail(ans)
}

// awaitStart returns once the exec's process has started (exec inspect reports its pid), the
// exec has ended, or its stream is done. It polls from 1 ms up to 8 ms apart.
func (b *apiBound) awaitStart(ctx context.Context, execID string, streamDone <-chan struct{}) {
	wait := time.Millisecond
	for {
		res, err := b.client.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil || res.PID != 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-streamDone:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		if wait < 8*time.Millisecond {
			wait *= 2
		}
	}
}

// exitCode reads the exec's exit code once its stream has ended, and its process's pid: 0
// when the runtime never started one. The daemon records the code before it closes the
// stream; a still-running answer is asked again, briefly.
func (b *apiBound) exitCode(ctx context.Context, execID string) (code, pid int, _ error) {
	for i := 0; ; i++ {
		res, err := b.client.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, 0, err
		}
		if !res.Running || i >= 100 {
			return res.ExitCode, res.PID, nil
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, 0, ctx.Err()
		}
	}
}

// budgetWriter keeps what it is given and charges it to a shared output budget (nil: none),
// handing what fits to output (nil: nobody) as the demultiplexer writes it.
type budgetWriter struct {
	buf    *bytes.Buffer
	b      *outputBudget
	stream int
	output func(int, []byte)
	keep   int64 // > 0: buf keeps only the first keep bytes
}

func (w budgetWriter) Write(p []byte) (int, error) {
	switch room := w.keep - int64(w.buf.Len()); {
	case w.keep <= 0:
		w.buf.Write(p)
	case room > 0:
		w.buf.Write(p[:min(int64(len(p)), room)])
	}
	if w.b != nil && w.b.used.Add(int64(len(p))) > w.b.max {
		return len(p), errOverBudget
	}
	if w.output != nil && len(p) > 0 {
		w.output(w.stream, p)
	}
	return len(p), nil
}
