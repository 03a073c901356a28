package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// ForwardedHeader marks an acquire one engine forwarded to the sandbox's owner; the owner does
// not forward it again, so a placement that moves mid-call cannot bounce a request around.
const ForwardedHeader = "Maf-Sandbox-Forwarded-By"

// WithPlacement makes the engine one of a cluster that records sandbox ownership in p's bucket
// (package placement): a cold acquire claims the sandbox before creating anything, an acquire
// of a sandbox another engine owns is forwarded to that engine, the engine renews the leases of
// what it holds and stops serving a sandbox whose lease it lost, and dispose, scope purge and
// Stop release its entries; a dispose or purge of a sandbox another live engine owns is
// forwarded to that engine, and a lapsed owner's entry is claimed and then released
// (placement_dispose.go). p's engine ID must be this engine's ([WithEngineID]). Without it
// (the default) the engine keeps no placement, as a single engine needs none.
func WithPlacement(p *placement.Store) Option {
	return func(o *options) error {
		if p == nil {
			return errOption("nil placement store")
		}
		o.placement = p
		return nil
	}
}

// leases is what the engine holds in the placement bucket, by entry.
type leases struct {
	mu   sync.Mutex
	held map[string]heldLease
}

type heldLease struct {
	lease placement.Lease
	key   sandbox.Key
	kind  string
	fence *fence
}

// fence ends when its lease does: lapsed unrenewed by this engine's clock, lost, or given up.
// Every call on the sandbox runs under it (fenced), so that an owner cut off from the cluster
// abandons the calls it admitted — a file call's freeze is lifted then — before a taker may
// claim the sandbox, a grace later.
type fence struct {
	ctx   context.Context
	end   context.CancelCauseFunc
	timer *time.Timer
}

// errLeaseEnded is the cause of a fenced call's cancellation.
var errLeaseEnded = errors.New("this engine's placement lease on the sandbox ended")

func newFence(expires time.Time) *fence {
	ctx, end := context.WithCancelCause(context.Background())
	return &fence{ctx: ctx, end: end, timer: time.AfterFunc(time.Until(expires), func() { end(errLeaseEnded) })}
}

// extend moves the fence's end to expires; a fence that already ended stays ended, and a new
// one is returned in its place.
func (f *fence) extend(expires time.Time) *fence {
	if f.timer.Stop() {
		f.timer.Reset(time.Until(expires))
		return f
	}
	f.stop()
	return newFence(expires)
}

func (f *fence) stop() {
	f.timer.Stop()
	f.end(errLeaseEnded)
}

func newLeases() *leases { return &leases{held: map[string]heldLease{}} }

func (l *leases) put(key sandbox.Key, kind string, lease placement.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.held[lease.Entry]; ok {
		l.held[lease.Entry] = heldLease{lease: lease, key: key, kind: kind, fence: old.fence.extend(lease.Expires)}
		return
	}
	l.held[lease.Entry] = heldLease{lease: lease, key: key, kind: kind, fence: newFence(lease.Expires)}
}

// fenced returns ctx bounded by the fence of (key, kind)'s lease, and the function that
// releases it; ctx as it is without a lease.
func (l *leases) fenced(ctx context.Context, key sandbox.Key, kind string) (context.Context, func()) {
	l.mu.Lock()
	h, ok := l.held[placement.EntryKey(key, kind)]
	l.mu.Unlock()
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.fence.ctx, func() { cancel(context.Cause(h.fence.ctx)) })
	return ctx, func() { stop(); cancel(nil) }
}

func (l *leases) get(key sandbox.Key, kind string) (placement.Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[placement.EntryKey(key, kind)]
	return h.lease, ok
}

// replace stores l in place of the lease of its entry while that is still at revision rev.
func (l *leases) replace(rev uint64, nl placement.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.held[nl.Entry]; ok && cur.lease.Revision == rev {
		cur.lease = nl
		cur.fence = cur.fence.extend(nl.Expires)
		l.held[nl.Entry] = cur
	}
}

// take removes and returns the leases match accepts.
func (l *leases) take(match func(heldLease) bool) []heldLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []heldLease
	for e, h := range l.held {
		if match(h) {
			h.fence.stop()
			out = append(out, h)
			delete(l.held, e)
		}
	}
	return out
}

// count is how many leases are held.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// snapshot returns every lease, leaving them held.
func (l *leases) snapshot() []heldLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]heldLease, 0, len(l.held))
	for _, h := range l.held {
		out = append(out, h)
	}
	return out
}

// claim makes this engine the owner of (key, kind) before an acquire creates anything. It
// returns the owner's answer instead when another engine owns the sandbox (the acquire was
// forwarded there), and a release to call if the acquire then fails on a sandbox it just
// claimed. Without placement it does nothing.
func (s *Service) claim(ctx context.Context, key sandbox.Key, kind string) (forwarded any, release func(), err error) {
	p := s.o.placement
	if p == nil {
		return nil, func() {}, nil
	}
	if l, ok := s.leases.get(key, kind); ok && l.Valid(time.Now()) {
		return nil, func() {}, nil // warm: ours, and the renewer keeps it so
	}
	if s.lame() {
		// No new sandboxes: one another engine owns is forwarded there, any other refused.
		if r, ok, err := p.Get(ctx, key, kind); err == nil && ok && r.Engine != s.id && time.Now().Before(r.Expires) {
			return s.forward(ctx, r.Engine)
		}
		return nil, nil, s.errLameDuck()
	}
	l, taken, err := p.Claim(ctx, key, kind)
	var held *placement.HeldError
	switch {
	case errors.As(err, &held):
		return s.forward(ctx, held.Owner)
	case err != nil:
		return nil, nil, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the placement bucket cannot be reached: %v", err)}
	}
	s.leases.put(key, kind, l)
	change := telemetry.LeaseClaimed
	if taken != nil {
		change = telemetry.LeaseTakenOver
	}
	s.o.metrics.LeaseChanged(ctx, change)
	release = func() {
		s.leases.take(func(h heldLease) bool { return h.lease.Entry == l.Entry })
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Release(rctx, l); err != nil {
			s.log.Debug("release the claim of a failed acquire", zap.Error(err))
		}
	}
	if taken != nil {
		if err := s.takeOver(ctx, key, kind, taken); err != nil {
			release()
			return nil, nil, err
		}
		auditClaim(ctx, taken.Engine)
	} else {
		auditClaim(ctx, "")
	}
	return nil, release, nil
}

// takeOver readies this engine's daemon for a sandbox whose lapsed owner it just replaced.
// On the owner's own daemon the owner's container is the one the acquire finds under the
// sandbox's name, and the acquire adopts it: same instance, same files, and a freeze the dead
// owner left is thawed there (actors, recoverFrozen) — by the new owner, the only process now
// entitled to. On another daemon the owner's container stays where it is, for that host's
// reaper; a container this daemon holds under the name is from an older tenure here, and
// adopting it would serve stale files as current, so it is disposed and the acquire creates
// afresh. When either daemon is unrecorded the container found is adopted.
func (s *Service) takeOver(ctx context.Context, key sandbox.Key, kind string, taken *placement.Record) error {
	here := s.o.placement.Daemon()
	log := s.log.With(zap.Stringer("key", key), zap.String("kind", kind), zap.String("from", taken.Engine))
	if taken.Daemon == "" || here == "" || taken.Daemon == here {
		// The router trusts no instance it did not hand out itself (the protocol's acquire,
		// step 7); the record vouches for the one the owner handed out, and only that one.
		s.router.Vouch(key, kind, backendName(s), taken.Instance)
		log.Info("took a lapsed sandbox over on its daemon; adopting its container", zap.String("instance", taken.Instance))
		return nil
	}
	log.Info("took a lapsed sandbox over from another daemon; creating it afresh here",
		zap.String("from_daemon", taken.Daemon))
	if f := s.router.Dispose(ctx, key, sandbox.DisposeOptions{Kind: &kind}); f != nil {
		return &messages.EngineUnavailableError{Reason: fmt.Sprintf(
			"took the sandbox over from daemon %s, but this daemon's older container of it could not be removed (%v); try again",
			taken.Daemon, f)}
	}
	return nil
}

// recordInstance writes the instance an acquire handed out into the sandbox's placement entry
// when it is not there yet, so that a taker on this daemon can adopt it. It gives up quietly:
// without it a taker creates afresh, which loses files but never serves a wrong container.
func (s *Service) recordInstance(ctx context.Context, key sandbox.Key, kind, instance string) {
	p := s.o.placement
	if p == nil {
		return
	}
	for range 3 {
		l, ok := s.leases.get(key, kind)
		if !ok || l.Instance == instance {
			return
		}
		l.Instance = instance
		nl, err := p.Renew(ctx, l)
		if err == nil {
			s.leases.replace(l.Revision, nl)
			return
		}
		if !errors.Is(err, placement.ErrNotOwner) {
			s.log.Debug("record the instance in the placement entry", zap.String("entry", l.Entry), zap.Error(err))
			return
		}
		// A renewal moved the revision meanwhile: read the lease it left and try again.
	}
}

// forward sends the acquire this call carries to owner's own acquire subject and returns its
// answer. An acquire that was itself forwarded is not forwarded again: the client retries it.
func (s *Service) forward(ctx context.Context, owner string) (any, func(), error) {
	c := callOf(ctx)
	if c == nil {
		return nil, nil, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the sandbox is placed on engine %s, which this forwarded call did not reach", owner)}
	}
	var resp messages.APIAcquireResponse
	if err := s.relayed(ctx, messages.SubjectEngineAcquireT, owner, c.msg.Data, &resp); err != nil {
		return nil, nil, err
	}
	s.log.Debug("forwarded an acquire to its owner", zap.String("owner", owner))
	return &resp, nil, nil
}

// relay sends data, a request of this call's, to engine owner's own subject of subjectT, marked
// as forwarded, and returns the reply. A call that was itself forwarded is not forwarded again
// ([*EngineUnavailableError], as when the owner does not answer): the client retries it.
func (s *Service) relay(ctx context.Context, subjectT, owner string, data []byte) (*nats.Msg, error) {
	c := callOf(ctx)
	if c == nil || c.msg.Header.Get(ForwardedHeader) != "" {
		return nil, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the sandbox is placed on engine %s, which this forwarded call did not reach", owner)}
	}
	h := c.headers()
	h.Set(ForwardedHeader, s.id)
	subject := messages.Engine(subjectT, s.o.prefix, owner)
	// A reply subscription of its own, gone when the call is: the connection's shared request
	// inbox would stay subscribed, and Stop waits for the service's subscriptions to go.
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("forward the %s to engine %s: %w", c.op.name, owner, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Header: h, Data: data}); err != nil {
		return nil, fmt.Errorf("forward the %s to engine %s: %w", c.op.name, owner, err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, &messages.EngineUnavailableError{Subject: subject, Reason: fmt.Sprintf("the sandbox's owner, engine %s, does not answer; its lease must lapse before another engine takes it", owner)}
	}
	if err != nil {
		return nil, fmt.Errorf("forward the %s to engine %s: %w", c.op.name, owner, err)
	}
	return msg, nil
}

// relayed relays data as relay does and decodes the owner's reply into resp, a response type
// of package messages; the error the owner answered is returned as the error it stands for.
func (s *Service) relayed(ctx context.Context, subjectT, owner string, data []byte, resp any) error {
	msg, err := s.relay(ctx, subjectT, owner, data)
	if err != nil {
		return err
	}
	var head messages.APIResponse
	if err := json.Unmarshal(msg.Data, &head); err != nil {
		return &messages.InternalError{Message: fmt.Sprintf("engine %s answered the forwarded call with no JSON: %v", owner, err)}
	}
	if head.Error != nil {
		return messages.DecodeError(head.Error)
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return &messages.InternalError{Message: fmt.Sprintf("engine %s answered the forwarded call with no %T: %v", owner, resp, err)}
	}
	return nil
}

// fenced bounds a call on the sandbox handle names by its lease's fence (see fence); without
// placement, or for a handle this engine does not hold, ctx is returned as it is.
func (s *Service) fenced(ctx context.Context, handle string) (context.Context, func()) {
	if s.o.placement == nil || handle == "" {
		return ctx, func() {}
	}
	h := s.handles.get(handle)
	if h == nil {
		return ctx, func() {}
	}
	return s.leases.fenced(ctx, h.key, h.kind)
}

// fenceError answers a call that failed because its fence ended as interrupted, not
// engine_unavailable: the call was taken and may have run (an exec whose command finished as
// the lease ended), and engine_unavailable tells a client the call did not run, which it may
// then send again. The caller acquires again, and reaches the sandbox's owner.
func fenceError(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errLeaseEnded) {
		return &messages.InterruptedError{Reason: "this engine's placement lease on the sandbox ended during the call, which may have run; acquire the sandbox again"}
	}
	return err
}

// checkLease refuses a call on h once this engine's lease on its sandbox is gone or lapsed:
// another engine may own it by now, and only the owner may touch it.
func (s *Service) checkLease(h *handle) error {
	if s.o.placement == nil {
		return nil
	}
	if l, ok := s.leases.get(h.key, h.kind); ok && l.Valid(time.Now()) {
		return nil
	}
	return &messages.EngineUnavailableError{Reason: "this engine no longer holds the sandbox's placement lease; acquire it again"}
}

// released forgets and deletes the entries of the leases match accepts (dispose, scope purge).
func (s *Service) released(ctx context.Context, match func(key sandbox.Key, kind string) bool) {
	if s.o.placement == nil {
		return
	}
	for _, h := range s.leases.take(func(h heldLease) bool { return match(h.key, h.kind) }) {
		if err := s.o.placement.Release(ctx, h.lease); err != nil {
			s.log.Debug("release a placement entry", zap.String("entry", h.lease.Entry), zap.Error(err))
		}
	}
}

// renewParallel bounds the renewals in flight at once: one round trip each (0.4 ms on a
// replicated cluster, docs/benchmarks.md), so done one by one a few thousand sandboxes would
// outlast a third of the lease.
const renewParallel = 16

// renewer renews every lease at a third of the lease time until stop is closed. A lease found
// lost is dropped with its handles, so that later calls on them are refused. While it runs, the
// leases held are reported to the metrics.
func (s *Service) renewer(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	unobserve, err := s.o.metrics.ObserveLeases(s.leases.count)
	if err != nil {
		s.log.Warn("placement leases are not reported to the metrics", zap.Error(err))
		unobserve = func() error { return nil }
	}
	defer func() { _ = unobserve() }()
	t := time.NewTicker(s.o.placement.Lease() / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		slots := make(chan struct{}, renewParallel)
		var wg sync.WaitGroup
		for _, h := range s.leases.snapshot() {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				s.renew(h)
			}()
		}
		wg.Wait()
	}
}

// renew renews one lease and records the outcome.
func (s *Service) renew(h heldLease) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.placement.Lease()/3)
	l, err := s.o.placement.Renew(ctx, h.lease)
	cancel()
	switch {
	case err == nil:
		s.leases.replace(h.lease.Revision, l)
	case errors.Is(err, placement.ErrNotOwner) && s.stillOurs(h):
		// Another write of this engine's (an instance recorded) moved the revision: not lost.
	case errors.Is(err, placement.ErrNotOwner):
		// Only when the lease held is still the one renewed: a claim of this engine's own may
		// have replaced it meanwhile, moving the revision under this renewal.
		if len(s.leases.take(func(x heldLease) bool {
			return x.lease.Entry == h.lease.Entry && x.lease.Revision == h.lease.Revision
		})) == 0 {
			return
		}
		s.o.metrics.LeaseChanged(context.Background(), telemetry.LeaseLost)
		s.log.Warn("lost a sandbox's placement lease; its handles are dropped", zap.Stringer("key", h.key),
			zap.String("kind", h.kind), zap.Error(err))
		s.transfers.forget(s.handles.drop(func(x *handle) bool { return x.key == h.key && x.kind == h.kind }))
		s.auditEngine(events.AuditPlacementChanged, "lost", &h.key, h.kind)
	default:
		s.log.Debug("renew a placement lease", zap.String("entry", h.lease.Entry), zap.Error(err))
	}
}

// stillOurs reports whether the bucket's entry of h still names this engine, read after a
// renewal of h was refused: a write of this engine's own then moved the revision.
func (s *Service) stillOurs(h heldLease) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.placement.Lease()/3)
	defer cancel()
	r, ok, err := s.o.placement.Get(ctx, h.key, h.kind)
	return err == nil && ok && r.Engine == s.id && time.Now().Before(r.Expires)
}

// releaseAll gives every lease up at Stop, so that another engine can take the sandboxes over
// at once instead of after a lapse.
func (s *Service) releaseAll() {
	if s.o.placement == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range s.leases.take(func(heldLease) bool { return true }) {
		if err := s.o.placement.Release(ctx, h.lease); err != nil {
			s.log.Debug("release a placement entry at stop", zap.String("entry", h.lease.Entry), zap.Error(err))
		}
	}
}
