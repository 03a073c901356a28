package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/internal/procbuf"
	"github.com/mafsandbox/engine/sandbox"
)

// ProcessStore keeps processes' output where it outlives the sandbox's buffers and the
// engine: events.ProcessStreams, on JetStream. With one ([WithProcessStore]) the backend
// follows every process it starts or finds (a pump per process: process_store.go), stores
// its output in order, releases from the supervisor what was stored, and reads come from the
// store; a process's stored records are keyed by its ID and sequence, so an engine that
// follows it again after another stopped stores every byte once. Each method waits for the
// store's acknowledgement.
type ProcessStore interface {
	// ProcessResume is where ref's stored output ends (the sequence after its last stored
	// byte or cut) and whether its exit is stored.
	ProcessResume(ctx context.Context, ref sandbox.ProcessRef) (next int64, ended bool, err error)
	ProcessStarted(ctx context.Context, ref sandbox.ProcessRef, proc sandbox.Process, ret *sandbox.OutputRetention) error
	ProcessOutput(ctx context.Context, ref sandbox.ProcessRef, c sandbox.OutputChunk, ret *sandbox.OutputRetention) error
	ProcessCut(ctx context.Context, ref sandbox.ProcessRef, cut sandbox.OutputCut, ret *sandbox.OutputRetention) error
	ProcessExited(ctx context.Context, ref sandbox.ProcessRef, proc sandbox.Process, ret *sandbox.OutputRetention) error
	ReadProcessOutput(ctx context.Context, ref sandbox.ProcessRef, from int64, opts sandbox.ReadOptions) (sandbox.ProcessOutput, error)
	// ProcessRecords is what the store holds of the processes of one instance, each in the
	// state its last record tells.
	ProcessRecords(ctx context.Context, key sandbox.Key, kind, instance string) ([]sandbox.Process, error)
	// Retention is the store's own retention, the most a process may ask.
	Retention() sandbox.OutputRetention
}

// WithProcessStore stores every process's output in s (default: none; output is then read
// from the sandbox's supervisor, or the engine's buffer for a docker exec, within their
// bounds).
func WithProcessStore(s ProcessStore) Option {
	return func(o *options) error { o.procStore = s; return nil }
}

// storeMessage is the most one stored record of output carries: pieces the supervisor sent
// back to back are joined up to it.
const storeMessage = 768 << 10

// pumps are the processes the backend follows into its store, by instance and ID.
type pumps struct {
	mu   sync.Mutex
	by   map[string]*pump
	seen map[string]bool // instances whose processes were looked for after an acquire
}

// pump follows one process into the store.
type pump struct {
	b         *Backend
	sb        *Sandbox
	ref       sandbox.ProcessRef
	ret       *sandbox.OutputRetention
	start     sandbox.Process // as started, for its start record
	docker    *dockerProc     // nil: on the supervisor
	done      chan struct{}
	disposing bool // guarded by pumps.mu
}

func pumpKey(ref sandbox.ProcessRef) string { return ref.Instance + "/" + ref.ID }

// follow starts following ref into the store unless it is followed already; its done channel
// closes once its exit is stored (or the engine stopped).
func (b *Backend) follow(sb *Sandbox, ref sandbox.ProcessRef, start sandbox.Process, ret *sandbox.OutputRetention, dp *dockerProc) *pump {
	b.pumps.mu.Lock()
	defer b.pumps.mu.Unlock()
	if b.pumps.by == nil {
		b.pumps.by = map[string]*pump{}
	}
	k := pumpKey(ref)
	if p := b.pumps.by[k]; p != nil {
		return p
	}
	p := &pump{b: b, sb: sb, ref: ref, ret: ret, start: start, docker: dp, done: make(chan struct{})}
	b.pumps.by[k] = p
	go p.run()
	return p
}

func (b *Backend) pumpOf(ref sandbox.ProcessRef) *pump {
	b.pumps.mu.Lock()
	defer b.pumps.mu.Unlock()
	return b.pumps.by[pumpKey(ref)]
}

// disposingPumps marks the instance's pumps: a process whose end they did not see before
// the container went was killed at its disposal.
func (b *Backend) disposingPumps(instance string) []*pump {
	b.pumps.mu.Lock()
	defer b.pumps.mu.Unlock()
	delete(b.pumps.seen, instance) // a disposed instance is not adopted again
	var ps []*pump
	for _, p := range b.pumps.by {
		if p.ref.Instance == instance {
			p.disposing = true
			ps = append(ps, p)
		}
	}
	return ps
}

func (p *pump) isDisposing() bool {
	p.b.pumps.mu.Lock()
	defer p.b.pumps.mu.Unlock()
	return p.disposing
}

// pumpRetry paces a pump's retries: a store away (NATS down) or a supervisor not answering.
func pumpRetry() backoff.BackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, 5*time.Second, 0
	return bo
}

// run follows the process until its exit is stored or the engine stops, starting again from
// what the store holds after any failure.
func (p *pump) run() {
	defer func() {
		p.b.pumps.mu.Lock()
		delete(p.b.pumps.by, pumpKey(p.ref))
		p.b.pumps.mu.Unlock()
		close(p.done)
	}()
	ctx := p.b.life
	bo := pumpRetry()
	failing := false
	for {
		err := p.once(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !failing {
			p.b.log.Info("process output not stored yet; retrying", zap.String("process", p.ref.ID), zap.String("instance", p.ref.Instance), zap.Error(err))
			failing = true
		}
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// errGone is a process its supervisor no longer has, or whose sandbox is gone.
var errGone = errors.New("the process is gone")

// once stores what the store lacks of the process, from where the store's records end; nil
// once its exit is stored.
func (p *pump) once(ctx context.Context) error {
	store := p.b.procStore
	next, ended, err := store.ProcessResume(ctx, p.ref)
	if err != nil || ended {
		return err
	}
	if next == 0 && p.start.ID != "" {
		if err := store.ProcessStarted(ctx, p.ref, p.start, p.ret); err != nil {
			return err
		}
	}
	src, err := p.source(ctx, next)
	if errors.Is(err, errGone) {
		return p.lost(ctx, next)
	}
	if err != nil {
		return err
	}
	defer src.close()
	// Announced as the process's follower at once: from here the supervisor holds the process
	// back while the store lags rather than drop its output.
	src.release(next)
	w := &storeWriter{ctx: ctx, p: p, src: src}
	for {
		ev, err := src.next(ctx)
		if errors.Is(err, errGone) {
			if err := w.flush(); err != nil {
				return err
			}
			return p.lost(ctx, w.end(next))
		}
		if err != nil {
			return err
		}
		done, err := w.take(ev)
		if err != nil || done {
			return err
		}
	}
}

// lost stores the process's end as unknown (or as its disposal's, when the sandbox was being
// disposed) at end, the last stored sequence.
func (p *pump) lost(ctx context.Context, end int64) error {
	exit := sandbox.ProcessExit{Reason: sandbox.ExitLost, ExitCode: -1, At: time.Now().UTC()}
	if p.isDisposing() {
		exit = sandbox.ProcessExit{Reason: sandbox.ExitDisposed, ExitCode: 128 + int(sandbox.SIGKILL), Signal: sandbox.SIGKILL, At: exit.At}
	}
	proc := p.start
	proc.ID, proc.State, proc.Exit, proc.Output = p.ref.ID, sandbox.ProcessStateExited, &exit, end
	if err := p.b.procStore.ProcessExited(ctx, p.ref, proc, p.ret); err != nil {
		return err
	}
	p.b.reportExited(p.sb, proc)
	return nil
}

// pumpEvent is one thing a source hands the pump: a chunk, a gap, everything sent so far
// (caught), or the process's end (with its record).
type pumpEvent struct {
	chunk  *sandbox.OutputChunk
	gap    *sandbox.OutputCut
	caught bool
	end    *sandbox.Process
}

// pumpSource is where a pump reads a process's output: its supervisor, or the engine's buffer
// of a docker exec.
type pumpSource interface {
	next(ctx context.Context) (pumpEvent, error)
	release(seq int64)
	close()
}

func (p *pump) source(ctx context.Context, from int64) (pumpSource, error) {
	if p.docker != nil {
		return &bufferSource{buf: p.docker.buf, from: from, end: func() sandbox.Process { return p.docker.record(false) }}, nil
	}
	route, err := p.sb.processRoute(ctx, "", false)
	if errors.As(err, new(*sandbox.GoneError)) || (err == nil && route.Route == nil) {
		return nil, errGone
	}
	if err != nil {
		return nil, err
	}
	s, err := channelAttach(ctx, route.Route, p.ref.ID, from)
	if err != nil {
		return nil, err
	}
	return &attachSource{s: s}, nil
}

// storeWriter joins chunks into records of at most storeMessage and stores them in order,
// releasing each from the source once stored.
type storeWriter struct {
	ctx     context.Context
	p       *pump
	src     pumpSource
	pending *sandbox.OutputChunk
	stored  int64     // the end of what was stored; -1 until something was
	next    time.Time // the output rate's: the earliest the next record may be stored
}

func (w *storeWriter) end(from int64) int64 {
	if w.pending != nil {
		return w.pending.End()
	}
	return max(from, w.stored)
}

// take handles one event and reports whether the process's exit is stored.
func (w *storeWriter) take(ev pumpEvent) (bool, error) {
	store := w.p.b.procStore
	switch {
	case ev.chunk != nil:
		c := ev.chunk
		if w.pending != nil && (w.pending.Stream != c.Stream || w.pending.End() != c.Seq || len(w.pending.Data)+len(c.Data) > storeMessage) {
			if err := w.flush(); err != nil {
				return false, err
			}
		}
		if w.pending == nil {
			w.pending = &sandbox.OutputChunk{Seq: c.Seq, Stream: c.Stream, Data: append(make([]byte, 0, storeMessage), c.Data...)}
		} else {
			w.pending.Data = append(w.pending.Data, c.Data...)
		}
		if len(w.pending.Data) >= storeMessage {
			return false, w.flush()
		}
	case ev.caught:
		return false, w.flush()
	case ev.gap != nil:
		if err := w.flush(); err != nil {
			return false, err
		}
		if err := store.ProcessCut(w.ctx, w.p.ref, *ev.gap, w.p.ret); err != nil {
			return false, err
		}
		w.src.release(ev.gap.To)
	case ev.end != nil:
		if err := w.flush(); err != nil {
			return false, err
		}
		if err := store.ProcessExited(w.ctx, w.p.ref, *ev.end, w.p.ret); err != nil {
			return false, err
		}
		w.p.b.reportExited(w.p.sb, *ev.end)
		return true, nil
	}
	return false, nil
}

// flush stores the pending record, trying again while the store refuses it (NATS away): the
// source waits meanwhile, and the supervisor holds the process's output within its bound.
func (w *storeWriter) flush() error {
	if w.pending == nil {
		return nil
	}
	if err := w.pace(int64(len(w.pending.Data))); err != nil {
		return err
	}
	bo := pumpRetry()
	for {
		err := w.p.b.procStore.ProcessOutput(w.ctx, w.p.ref, *w.pending, w.p.ret)
		if err == nil {
			break
		}
		if w.ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-w.ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	w.stored = w.pending.End()
	w.src.release(w.stored)
	w.pending = nil
	return nil
}

// pace keeps the process's stored output within the backend's output rate: a record of n
// bytes waits until the ones before it have had their share of a second.
func (w *storeWriter) pace(n int64) error {
	rate := w.p.b.procLimits.OutputRate
	if rate <= 0 {
		return nil
	}
	now := time.Now()
	if w.next.Before(now) {
		w.next = now
	}
	wait := w.next.Sub(now)
	w.next = w.next.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ctx.Done():
		return w.ctx.Err()
	case <-t.C:
		return nil
	}
}

// attachSource reads a process's output from its supervisor.
type attachSource struct{ s *attachStream }

func (a *attachSource) next(ctx context.Context) (pumpEvent, error) {
	typ, p, err := a.s.next(time.Time{})
	if err != nil {
		if ctx.Err() != nil {
			return pumpEvent{}, ctx.Err()
		}
		return pumpEvent{}, fmt.Errorf("follow the process: %w", err)
	}
	return attachEvent(typ, p)
}

func attachEvent(typ byte, p []byte) (pumpEvent, error) {
	g := &gathering{max: 1 << 62}
	done, err := g.take(typ, p, "")
	var nf *sandbox.ProcessNotFoundError
	switch {
	case errors.As(err, &nf):
		return pumpEvent{}, errGone
	case err != nil:
		return pumpEvent{}, err
	case typ == execwire.Caught:
		return pumpEvent{caught: true}, nil
	case g.out.Cut != nil:
		return pumpEvent{gap: g.out.Cut}, nil
	case len(g.out.Chunks) > 0:
		return pumpEvent{chunk: &g.out.Chunks[0]}, nil
	case done && typ == execwire.End:
		rec, err := decodeEnd(p)
		if err != nil {
			return pumpEvent{}, err
		}
		return pumpEvent{end: &rec}, nil
	}
	return pumpEvent{}, nil
}

func (a *attachSource) release(seq int64) {
	_ = a.s.c.SetWriteDeadline(time.Now().Add(execKillBudget))
	_ = execwire.Write(a.s.c, execwire.Release, execwire.EncodeSeqs(seq))
}

func (a *attachSource) close() { a.s.close() }

// bufferSource reads a docker exec process's output from the engine's buffer.
type bufferSource struct {
	buf    *procbuf.Buffer
	from   int64
	queue  []pumpEvent
	caught bool
	end    func() sandbox.Process
}

func (b *bufferSource) next(ctx context.Context) (pumpEvent, error) {
	for len(b.queue) == 0 {
		changed := b.buf.Changed()
		chunks, gap, next, err := b.buf.Read(b.from, storeMessage)
		if err != nil {
			return pumpEvent{}, err
		}
		if gap != nil {
			b.queue = append(b.queue, pumpEvent{gap: &sandbox.OutputCut{From: gap.From, To: gap.To, Reason: "buffer"}})
		}
		for _, c := range chunks {
			b.queue = append(b.queue, pumpEvent{chunk: &sandbox.OutputChunk{Seq: c.Seq, Stream: streamName(c.Stream), Data: c.Data}})
		}
		b.from = next
		if len(b.queue) > 0 {
			b.caught = false
			break
		}
		if st := b.buf.State(); st.Closed && next == st.End {
			rec := b.end()
			return pumpEvent{end: &rec}, nil
		}
		if !b.caught {
			b.caught = true
			return pumpEvent{caught: true}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return pumpEvent{}, ctx.Err()
		}
	}
	ev := b.queue[0]
	b.queue = b.queue[1:]
	return ev, nil
}

func (b *bufferSource) release(seq int64) { b.buf.Release(seq) }
func (b *bufferSource) close()            {}

// decodeEnd is the process an End frame carries.
func decodeEnd(p []byte) (sandbox.Process, error) {
	var rec execwire.Process
	if err := json.Unmarshal(p, &rec); err != nil {
		return sandbox.Process{}, fmt.Errorf("%w: an end record: %w", execwire.ErrMalformed, err)
	}
	return processFromWire(rec), nil
}

// ProcessRef names one of the sandbox's processes wherever its output is stored.
func (s *Sandbox) ProcessRef(id string) sandbox.ProcessRef {
	return sandbox.ProcessRef{Key: s.key, Kind: s.kind, Instance: s.inst().id, ID: id}
}

// reattach follows, after an acquire of an instance this handle did not create, every
// process its supervisor holds and the store does not hold complete (another engine followed
// them until it stopped), and records as lost what the store says was running and nothing
// runs any more (a docker exec of an engine that stopped). Once per instance.
func (b *Backend) reattach(sb *Sandbox) {
	if b.procStore == nil && b.observer() == nil {
		return
	}
	b.pumps.mu.Lock()
	if b.pumps.seen == nil {
		b.pumps.seen = map[string]bool{}
	}
	seen := b.pumps.seen[sb.inst().id]
	b.pumps.seen[sb.inst().id] = true
	b.pumps.mu.Unlock()
	if seen {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(b.life, time.Minute)
		defer cancel()
		if _, err := sb.ListProcesses(ctx); err != nil && ctx.Err() == nil {
			b.log.Info("the processes of an adopted sandbox were not followed again; the next process call tries again",
				zap.String("container", sb.name), zap.Error(err))
			b.pumps.mu.Lock()
			delete(b.pumps.seen, sb.inst().id)
			b.pumps.mu.Unlock()
		}
	}()
}

// followListed follows into the store every process of the list not followed yet, and
// records as lost, in the list too, what the store says runs though neither the supervisor
// nor this engine runs it.
func (s *Sandbox) followListed(ctx context.Context, listed []sandbox.Process) ([]sandbox.Process, error) {
	b := s.b
	if b.procStore == nil {
		return listed, nil
	}
	known := map[string]bool{}
	for _, p := range listed {
		known[p.ID] = true
		if p.Transport == sandbox.TransportSupervisor {
			start := p
			start.State, start.Exit = sandbox.ProcessStateRunning, nil
			b.follow(s, s.ProcessRef(p.ID), start, p.Retention, nil)
		}
	}
	stored, err := b.procStore.ProcessRecords(ctx, s.key, s.kind, s.inst().id)
	if err != nil {
		return listed, err
	}
	for _, p := range stored {
		if known[p.ID] {
			continue
		}
		if p.Exit == nil && b.pumpOf(s.ProcessRef(p.ID)) == nil {
			exit := sandbox.ProcessExit{Reason: sandbox.ExitLost, ExitCode: -1, At: time.Now().UTC()}
			p.State, p.Exit = sandbox.ProcessStateExited, &exit
			if err := b.procStore.ProcessExited(ctx, s.ProcessRef(p.ID), p, nil); err != nil {
				return listed, err
			}
			b.reportExited(s, p)
		}
		listed = append(listed, p)
	}
	return listed, nil
}
