package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/internal/procbuf"
	"github.com/mafsandbox/engine/sandbox"
)

// Processes of a sandbox without a supervisor: each is a docker exec the engine runs and
// follows itself, its output held in the engine (procbuf, bounded as a supervisor's). It
// takes no stdin, terminal, signal or timeout (Docker has no call for them on an exec), it
// ends with the sandbox or the engine, and its exit is the daemon's exit code. Such a process
// is not durable: an engine that stops stops following it.

// dockerStartSettle is how long a start waits, once the driver reported the exec's start, for
// the exec to end: the driver reports a start also when the runtime could not start the
// program (its stream ends at once), which the start must answer as a failure.
const dockerStartSettle = 250 * time.Millisecond

// dockerKeepOutput is what the driver keeps of a docker exec process's output in its own
// result (the output goes to the process's buffer): enough to recognise the runtime's words
// when it could not start the program.
const dockerKeepOutput = 64 << 10

// dockerProcs is every docker exec process the backend follows, by container.
type dockerProcs struct {
	mu sync.Mutex
	by map[string][]*dockerProc // container name → processes in start order
}

// dockerProc is one docker exec process.
type dockerProc struct {
	sb                  *Sandbox // the handle that started it: whose key and kind its reports carry
	container, instance string
	digest              string
	buf                 *procbuf.Buffer
	done                chan struct{}
	disposing           atomic.Bool

	mu  sync.Mutex
	rec sandbox.Process
}

func (r *dockerProcs) get(container, instance, id string) *dockerProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.by[container] {
		if p.instance == instance && p.rec.ID == id {
			return p
		}
	}
	return nil
}

func (r *dockerProcs) add(p *dockerProc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string][]*dockerProc{}
	}
	r.by[p.container] = append(r.by[p.container], p)
}

func (r *dockerProcs) list(container, instance string) []sandbox.Process {
	r.mu.Lock()
	ps := slices.Clone(r.by[container])
	r.mu.Unlock()
	var out []sandbox.Process
	for _, p := range ps {
		if p.instance == instance {
			out = append(out, p.record(false))
		}
	}
	return out
}

// disposing marks the container's processes as ended by its disposal, and forgets them.
func (r *dockerProcs) disposing(container string) {
	r.mu.Lock()
	ps := r.by[container]
	delete(r.by, container)
	r.mu.Unlock()
	for _, p := range ps {
		p.disposing.Store(true)
	}
}

// repeat answers a start whose ID a docker exec process of the instance already has: that
// process when the start is the same (ok), [*sandbox.ProcessExistsError] when it is not.
func (r *dockerProcs) repeat(container, instance string, spec sandbox.ProcessSpec, argv []string, dir string) (sandbox.Process, bool, error) {
	p := r.get(container, instance, spec.ID)
	if p == nil {
		return sandbox.Process{}, false, nil
	}
	if p.digest != dockerDigest(spec, argv, dir) {
		return sandbox.Process{}, true, &sandbox.ProcessExistsError{ID: spec.ID}
	}
	return p.record(false), true, nil
}

func dockerDigest(spec sandbox.ProcessSpec, argv []string, dir string) string {
	b, _ := json.Marshal(struct {
		Argv []string
		Dir  string
		Env  []string
		User string
	}{argv, dir, spec.Env, spec.User})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func (p *dockerProc) record(created bool) sandbox.Process {
	st := p.buf.State()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rec
	r.Output, r.Created = st.End, created
	return r
}

// startDocker starts spec as a docker exec the engine follows. What a docker exec cannot do
// is refused before anything runs.
func (s *Sandbox) startDocker(ctx context.Context, route *processRouteResponse, spec sandbox.ProcessSpec, argv []string, held int64) (sandbox.Process, error) {
	unsupported := func(what string) error {
		return &sandbox.UnsupportedError{Backend: BackendName, Op: "StartProcess (" + what + ")", Reason: dockerReason(route.Route != nil)}
	}
	switch {
	case spec.Terminal != nil:
		return sandbox.Process{}, unsupported("a terminal")
	case spec.Stdin:
		return sandbox.Process{}, unsupported("stdin")
	case spec.Timeout > 0:
		return sandbox.Process{}, unsupported("a timeout")
	}
	if route.Route != nil {
		rep, err := channelCall(ctx, s.name, route.Route, execwire.CallRequest{Op: execwire.OpList})
		if err != nil {
			return sandbox.Process{}, err
		}
		for _, p := range rep.Processes {
			if p.ID == spec.ID {
				return sandbox.Process{}, &sandbox.ProcessExistsError{ID: spec.ID}
			}
		}
	}
	p := &dockerProc{sb: s, container: s.name, instance: route.Target, digest: dockerDigest(spec, argv, route.Dir),
		buf: procbuf.New(held), done: make(chan struct{}),
		rec: sandbox.Process{ID: spec.ID, Argv: argv, WorkDir: route.Dir, State: sandbox.ProcessStateRunning, StartedAt: time.Now().UTC(),
			Transport: sandbox.TransportDockerExec, Retention: spec.Retention}}
	req := docker.ExecRequest{Target: route.Target, User: spec.User, WorkDir: route.Dir, Env: spec.Env, Argv: argv, KeepOutput: dockerKeepOutput,
		Output: func(stream int, b []byte) {
			st := procbuf.Stdout
			if stream == docker.StreamStderr {
				st = procbuf.Stderr
			}
			p.buf.Append(st, b)
		}}
	res, err := ask[*processExecResponse](ctx, s.b, s.name, s.pid, s.envelope(&processExecRequest{InstanceID: s.inst().id, Proc: p, Req: req}), 0)
	if err != nil {
		return sandbox.Process{}, err
	}
	if res.Err != nil {
		return sandbox.Process{}, res.Err
	}
	select {
	case err := <-res.Started:
		if err != nil {
			return sandbox.Process{}, err
		}
	case <-ctx.Done():
		return sandbox.Process{}, fmt.Errorf("start process %s in %s: %w", spec.ID, s.name, ctx.Err())
	}
	rec := p.record(true)
	s.b.reportStarted(ctx, s, rec)
	if s.b.procStore != nil {
		s.b.follow(s, s.ProcessRef(spec.ID), rec, spec.Retention, p)
	}
	return rec, nil
}

func dockerReason(supervised bool) string {
	if supervised {
		return "a process with its own user is a docker exec (the sandbox's supervisor runs as the container's user and switches to no other), which takes no stdin, terminal, signal or timeout"
	}
	return "the sandbox has no supervisor (its image runs an entrypoint of its own, or the engine cannot reach the daemon's host), so a process is a docker exec, which takes no stdin, terminal, signal or timeout"
}

// processExecRequest starts a docker exec process on the actor, which counts it among the
// execs a freeze waits for until the driver reports its start.
type processExecRequest struct {
	InstanceID string
	Proc       *dockerProc
	Req        docker.ExecRequest
}

// processExecResponse: Started gets nil once the process runs, or why it could not start.
type processExecResponse struct {
	Started <-chan error
	Err     error
}

func (*processExecRequest) needsFreeze() bool  { return false }
func (*processExecRequest) fail(err error) any { return &processExecResponse{Err: err} }

func (m *processExecRequest) run(ctx context.Context, a *containerActor, actx actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	if _, err := a.target(m.InstanceID); err != nil {
		reply(&processExecResponse{Err: err})
		return
	}
	seq := a.beginExec() // a freeze waits for its start (freeze.go)
	root, self := actx.ActorSystem().Root, actx.Self()
	started := make(chan error, 1)
	p, b := m.Proc, a.b
	go func() {
		var once sync.Once
		ran := make(chan struct{})
		signal := func() { once.Do(func() { root.Send(self, &execStarted{seq: seq}); close(ran) }) }
		done := make(chan error, 1)
		go func() {
			out, err := b.engine.ExecWithStart(b.life, m.Req, signal)
			signal()
			p.finish(out, err)
			if b.procStore == nil && !errors.As(err, new(*docker.ExecStartError)) {
				b.reportExited(p.sb, p.record(false)) // with a store, its pump reports the end
			}
			done <- err
		}()
		<-ran
		t := time.NewTimer(dockerStartSettle)
		defer t.Stop()
		select {
		case err := <-done:
			var se *docker.ExecStartError
			switch {
			case errors.As(err, &se):
				started <- &sandbox.ProcessStartError{ID: p.rec.ID, Cause: se.Cause, Message: se.Message}
			case err != nil:
				started <- fmt.Errorf("start process %s: %w", p.rec.ID, err)
			default:
				b.procs.add(p)
				started <- nil
			}
		case <-t.C:
			b.procs.add(p)
			started <- nil
		}
	}()
	reply(&processExecResponse{Started: started})
}

// finish records how the exec ended: its exit code (docker exec reports a code only), the
// sandbox's disposal, or lost when the engine stopped following it.
func (p *dockerProc) finish(out docker.ExecOutput, err error) {
	exit := &sandbox.ProcessExit{Reason: sandbox.ExitExited, ExitCode: out.ExitCode, At: time.Now().UTC()}
	switch {
	case p.disposing.Load():
		exit.Reason, exit.ExitCode, exit.Signal = sandbox.ExitDisposed, 128+int(sandbox.SIGKILL), sandbox.SIGKILL
	case err != nil:
		exit.Reason, exit.ExitCode = sandbox.ExitLost, -1
	}
	p.mu.Lock()
	p.rec.State, p.rec.Exit = sandbox.ProcessStateExited, exit
	p.mu.Unlock()
	p.buf.Close()
	close(p.done)
}

func (p *dockerProc) exit() *sandbox.ProcessExit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec.Exit
}

func (p *dockerProc) refuse(what string) error {
	return &sandbox.UnsupportedError{Backend: BackendName, Op: what + " of process " + p.rec.ID, Reason: dockerReason(false)}
}

func (p *dockerProc) wait(ctx context.Context) (sandbox.Process, error) {
	select {
	case <-p.done:
		return p.record(false), nil
	case <-ctx.Done():
		return sandbox.Process{}, fmt.Errorf("wait for process %s: %w", p.rec.ID, ctx.Err())
	}
}

func (p *dockerProc) read(ctx context.Context, from, maxBytes int64, wait time.Duration) (sandbox.ProcessOutput, error) {
	return readBuffer(ctx, p.buf, from, maxBytes, wait, p.exit)
}

// readBuffer is one read of a buffer the engine holds: from seq on, at most maxBytes,
// waiting up to wait when nothing is there yet; exit is how the process ended, asked once its
// output is complete.
func readBuffer(ctx context.Context, buf *procbuf.Buffer, from, maxBytes int64, wait time.Duration, exit func() *sandbox.ProcessExit) (sandbox.ProcessOutput, error) {
	var timer <-chan time.Time
	for {
		changed := buf.Changed()
		chunks, gap, next, err := buf.Read(from, int(min(maxBytes, 1<<30)))
		if err != nil {
			return sandbox.ProcessOutput{}, &sandbox.InvalidArgumentError{Reason: err.Error()}
		}
		out := sandbox.ProcessOutput{Next: next}
		if gap != nil {
			out.Cut = &sandbox.OutputCut{From: gap.From, To: gap.To, Reason: "buffer"}
		}
		for _, c := range chunks {
			out.Chunks = append(out.Chunks, sandbox.OutputChunk{Seq: c.Seq, Stream: streamName(c.Stream), Data: c.Data})
		}
		if st := buf.State(); st.Closed && next == st.End {
			out.Exit = exit()
		}
		if len(out.Chunks) > 0 || out.Cut != nil || out.Exit != nil || wait <= 0 {
			return out, nil
		}
		if timer == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-changed:
		case <-timer:
			return out, nil
		case <-ctx.Done():
			return sandbox.ProcessOutput{}, ctx.Err()
		}
	}
}
