package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// Tracer is a [docker.Driver] that records every container call it passes on — its name, when
// it began relative to the mark and how long it took — so `engine bench --trace` can show
// where a cold acquire's time goes beyond the runtime's own create and start.
type Tracer struct {
	docker.Driver
	mu    sync.Mutex
	mark  time.Time
	calls []Call
}

// Call is one engine call the tracer saw.
type Call struct {
	Op    string
	Arg   string
	Begin time.Duration // since the mark
	Took  time.Duration
	Err   bool
}

// NewTracer wraps d.
func NewTracer(d docker.Driver) *Tracer { return &Tracer{Driver: d, mark: time.Now()} }

// Mark forgets the calls so far and starts the clock again.
func (t *Tracer) Mark() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mark, t.calls = time.Now(), nil
}

// Calls returns the calls since the mark, in the order they began.
func (t *Tracer) Calls() []Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.calls)
	slices.SortFunc(out, func(a, b Call) int { return int(a.Begin - b.Begin) })
	return out
}

func (t *Tracer) record(op, arg string, began time.Time, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, Call{Op: op, Arg: arg, Begin: began.Sub(t.mark), Took: time.Since(began), Err: err != nil})
}

// Inspect implements docker.Driver.
func (t *Tracer) Inspect(ctx context.Context, target string) (docker.ContainerInfo, error) {
	began := time.Now()
	info, err := t.Driver.Inspect(ctx, target)
	t.record("inspect", "", began, err)
	return info, err
}

// ImageExists implements docker.Driver.
func (t *Tracer) ImageExists(ctx context.Context, image string) (bool, error) {
	began := time.Now()
	ok, err := t.Driver.ImageExists(ctx, image)
	t.record("image exists", "", began, err)
	return ok, err
}

// ImageEntrypoint implements docker.Driver.
func (t *Tracer) ImageEntrypoint(ctx context.Context, image string) ([]string, bool, error) {
	began := time.Now()
	ep, ok, err := t.Driver.ImageEntrypoint(ctx, image)
	t.record("image entrypoint", "", began, err)
	return ep, ok, err
}

// ServerOS implements docker.Driver.
func (t *Tracer) ServerOS(ctx context.Context) (string, error) {
	began := time.Now()
	os, err := t.Driver.ServerOS(ctx)
	t.record("server os", "", began, err)
	return os, err
}

// Create implements docker.Driver.
func (t *Tracer) Create(ctx context.Context, spec docker.CreateSpec) (string, error) {
	began := time.Now()
	id, err := t.Driver.Create(ctx, spec)
	t.record("create", "", began, err)
	return id, err
}

// Start implements docker.Driver.
func (t *Tracer) Start(ctx context.Context, target string) error {
	began := time.Now()
	err := t.Driver.Start(ctx, target)
	t.record("start", "", began, err)
	return err
}

// Remove implements docker.Driver.
func (t *Tracer) Remove(ctx context.Context, target string) (docker.RemoveOutcome, error) {
	began := time.Now()
	o, err := t.Driver.Remove(ctx, target)
	t.record("remove", "", began, err)
	return o, err
}

// Pause implements docker.Driver.
func (t *Tracer) Pause(ctx context.Context, target string) error {
	began := time.Now()
	err := t.Driver.Pause(ctx, target)
	t.record("pause", "", began, err)
	return err
}

// Unpause implements docker.Driver.
func (t *Tracer) Unpause(ctx context.Context, target string) error {
	began := time.Now()
	err := t.Driver.Unpause(ctx, target)
	t.record("unpause", "", began, err)
	return err
}

// Exec implements docker.Driver.
func (t *Tracer) Exec(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
	began := time.Now()
	out, err := t.Driver.Exec(ctx, req)
	t.record("exec", argv(req.Argv), began, err)
	return out, err
}

// Stat implements docker.Driver.
func (t *Tracer) Stat(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	began := time.Now()
	e, err := t.Driver.Stat(ctx, target, guestPath)
	t.record("stat", guestPath, began, err)
	return e, err
}

// Read implements docker.Driver.
func (t *Tracer) Read(ctx context.Context, target, guestPath string, maxBytes int64) (*docker.Entry, []byte, error) {
	began := time.Now()
	e, b, err := t.Driver.Read(ctx, target, guestPath, maxBytes)
	t.record("read", guestPath, began, err)
	return e, b, err
}

// CopyIn implements docker.Driver.
func (t *Tracer) CopyIn(ctx context.Context, target string, tarball []byte) error {
	began := time.Now()
	err := t.Driver.CopyIn(ctx, target, tarball)
	t.record("copy in", fmt.Sprintf("%d B", len(tarball)), began, err)
	return err
}

// ExecWithStart implements docker.Driver.
func (t *Tracer) ExecWithStart(ctx context.Context, req docker.ExecRequest, started func()) (docker.ExecOutput, error) {
	began := time.Now()
	out, err := t.Driver.ExecWithStart(ctx, req, started)
	t.record("exec", argv(req.Argv), began, err)
	return out, err
}

// StatType implements docker.Driver.
func (t *Tracer) StatType(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	began := time.Now()
	e, err := t.Driver.StatType(ctx, target, guestPath)
	t.record("stat type", guestPath, began, err)
	return e, err
}

func argv(a []string) string {
	s := fmt.Sprint(a)
	if len(s) > 48 {
		s = s[:45] + "..."
	}
	return s
}

// PrintTrace writes one traced operation: each call's start and duration, then the time no
// engine call was in flight (the engine's own work and the actor hops).
func PrintTrace(w io.Writer, title string, total time.Duration, calls []Call) {
	fmt.Fprintf(w, "%s: %.1f ms, %d engine calls\n", title, ms(total), len(calls))
	for _, c := range calls {
		flag := ""
		if c.Err {
			flag = " (error)"
		}
		fmt.Fprintf(w, "  +%7.1f  %7.1f ms  %-10s %s%s\n", ms(c.Begin), ms(c.Took), c.Op, c.Arg, flag)
	}
	busy := Busy(calls)
	fmt.Fprintf(w, "  engine busy %.1f ms, idle %.1f ms\n", ms(busy), ms(total-busy))
}

// Busy is the wall clock during which at least one of calls (sorted by Begin) was in flight.
func Busy(calls []Call) time.Duration {
	var busy, until time.Duration
	for _, c := range calls {
		end := c.Begin + c.Took
		switch {
		case c.Begin >= until:
			busy += c.Took
		case end > until:
			busy += end - until
		}
		until = max(until, end)
	}
	return busy
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// TraceCold runs cfg.Reps cold acquires of the bench's file-plane spec on b, whose engine is
// tr, then as many removals of a plain file, and prints each one's calls to w. Everything it
// creates is disposed before it returns.
func TraceCold(ctx context.Context, b *actors.Backend, tr *Tracer, cfg Config, w io.Writer) error {
	r := &runner{b: b, cfg: cfg, scope: "bench-" + randomHex()}
	defer r.b.DisposeScope(context.WithoutCancel(ctx), r.scope, "bench")
	files, _, err := specs(cfg)
	if err != nil {
		return err
	}
	var sb sandbox.Sandbox
	for i := range cfg.Reps {
		key := r.key("trace")
		tr.Mark()
		began := time.Now()
		if sb, err = b.Acquire(ctx, key, files); err != nil {
			return err
		}
		PrintTrace(w, fmt.Sprintf("acquire_cold #%d", i+1), time.Since(began), tr.Calls())
	}
	for i := range cfg.Reps {
		if err := sb.WriteFile(ctx, "gone.bin", []byte("x"), "."); err != nil {
			return err
		}
		tr.Mark()
		began := time.Now()
		if err := sb.Remove(ctx, "gone.bin", ".", false); err != nil {
			return err
		}
		PrintTrace(w, fmt.Sprintf("remove_file #%d", i+1), time.Since(began), tr.Calls())
	}
	return nil
}
