package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// The warm pool (opt-in, WithWarmPool): closed sandboxes of an image created, prepared and
// started ahead of demand under pool names and pool labels. An acquire of a new key whose
// spec a pool can serve (that image by name, closed egress, the default storage base, no spec
// labels) takes a member instead of creating a container: the member is renamed to the key's
// derived name and its binding is recorded (pool_binding.go). Everything else takes the cold
// path. A refill starts only while no acquire is in flight, so it never queues ahead of one;
// members that waited longer than the bound are replaced; Close removes the waiting ones; a
// fresh backend adopts the waiting members of its pools that a dead one left.

// DefaultPoolMaxWait is how long a member may wait for a key before it is replaced.
const DefaultPoolMaxWait = 10 * time.Minute

// poolKind is the kind a member is prepared as; the binding carries the key's real kind.
const poolKind = "maf-pool"

// poolOptions is the pools asked for: members per image, and the wait bound.
type poolOptions struct {
	sizes   map[string]int
	maxWait time.Duration
	hook    func(string) // tests (withPoolHook)
}

// withPoolHook is told, from the refill loop, when a refill was deferred for an acquire in
// flight ("deferred") and when a member was made ("made") (tests).
func withPoolHook(h func(string)) Option {
	return func(o *options) error { o.pool.hook = h; return nil }
}

// WithWarmPool keeps n closed sandboxes of image (a name, as specs give it) started ahead of
// demand. n of zero removes the image's pool. Off by default. A negative n or an empty image
// is refused with a [*sandbox.InvalidArgumentError].
func WithWarmPool(image string, n int) Option {
	return func(o *options) error {
		if image == "" || n < 0 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("warm pool %q=%d: an image and a size of at least zero", image, n)}
		}
		if o.pool.sizes == nil {
			o.pool.sizes = map[string]int{}
		}
		o.pool.sizes[image] = n
		if n == 0 {
			delete(o.pool.sizes, image)
		}
		return nil
	}
}

// WithWarmPoolMaxWait bounds how long a member waits for a key before it is replaced
// (default [DefaultPoolMaxWait]). The reaper's age of pooled sandboxes counts from their
// creation, so a sandbox handed out at the end of its wait is that much older.
func WithWarmPoolMaxWait(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return &sandbox.InvalidArgumentError{Reason: "the warm pool's wait bound must be positive"}
		}
		o.pool.maxWait = d
		return nil
	}
}

// poolMember is one waiting member.
type poolMember struct {
	name string // its pool name
	id   string
	made time.Time
}

// warmPool is the members of one image.
type warmPool struct {
	image string
	id    string // the pool label's value
	size  int

	mu   sync.Mutex
	idle []poolMember // oldest first
}

// warmPools is the backend's pools and their refill loop.
type warmPools struct {
	b       *Backend
	pools   map[string]*warmPool // by image
	maxWait time.Duration
	log     *zap.Logger

	acquiring atomic.Int64  // acquires in flight: no refill starts while one is
	kick      chan struct{} // wakes the loop: an acquire ended, a member was taken
	done      chan struct{} // closed when the loop has returned
	failing   bool          // the last refill failed (warn once per run of failures)
	spares    func() error  // stops the spares gauge
	hook      func(string)  // tests: told "deferred" and "made" from the loop
}

func newWarmPools(b *Backend, o poolOptions) *warmPools {
	if len(o.sizes) == 0 {
		return nil
	}
	w := &warmPools{b: b, pools: map[string]*warmPool{}, maxWait: o.maxWait, log: b.log.With(zap.String("op", "pool")),
		kick: make(chan struct{}, 1), done: make(chan struct{}), hook: o.hook}
	if w.hook == nil {
		w.hook = func(string) {}
	}
	if w.maxWait <= 0 {
		w.maxWait = DefaultPoolMaxWait
	}
	for image, n := range o.sizes {
		// The pool's identity: the image and the shape its members are made in.
		w.pools[image] = &warmPool{image: image, id: label.Value("closed|" + DefaultWorkDir + "|" + image), size: n}
	}
	stop, err := b.metrics.ObservePoolSpares(w.sparesByImage)
	if err != nil {
		b.log.Warn("pool spares gauge", zap.Error(err))
		stop = func() error { return nil }
	}
	w.spares = stop
	return w
}

// sparesByImage counts the waiting members of each pool.
func (w *warmPools) sparesByImage() map[string]int {
	out := map[string]int{}
	for image, p := range w.pools {
		p.mu.Lock()
		out[image] = len(p.idle)
		p.mu.Unlock()
	}
	return out
}

// wake asks the loop to look again; it never blocks.
func (w *warmPools) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// begin and end bracket an acquire: refills wait for the last one in flight to end.
func (w *warmPools) begin() {
	if w != nil {
		w.acquiring.Add(1)
	}
}

func (w *warmPools) end() {
	if w != nil && w.acquiring.Add(-1) == 0 {
		w.wake()
	}
}

// run adopts what a dead backend left, then keeps the pools full until ctx ends.
func (w *warmPools) run(ctx context.Context) {
	defer close(w.done)
	w.adopt(ctx)
	tick := time.NewTicker(max(w.maxWait/4, time.Second))
	defer tick.Stop()
	for {
		w.replaceStale(ctx)
		w.refill(ctx)
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-tick.C:
		}
	}
}

// refill makes members, one at a time, while a pool is short and no acquire is in flight.
func (w *warmPools) refill(ctx context.Context) {
	for _, p := range w.pools {
		for p.short() {
			if ctx.Err() != nil {
				return
			}
			if w.acquiring.Load() > 0 {
				w.hook("deferred")
				return // an acquire's end wakes the loop again
			}
			began := time.Now()
			m, err := w.make(ctx, p)
			if err != nil {
				if !w.failing && ctx.Err() == nil {
					w.log.Warn("warm pool refill failed; retrying later", zap.String("image", p.image), zap.Error(err))
				}
				w.failing = true
				return
			}
			if w.failing {
				w.log.Info("warm pool refill works again", zap.String("image", p.image))
			}
			w.failing = false
			w.b.metrics.PoolRefilled(ctx, p.image, time.Since(began))
			p.put(m)
			w.hook("made")
		}
	}
}

// make creates, prepares and starts one member through the actor of its pool name, as a
// cold acquire would, but under pool labels and bound to no key.
func (w *warmPools) make(ctx context.Context, p *warmPool) (poolMember, error) {
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return poolMember{}, fmt.Errorf("name a pool member: %w", err)
	}
	name := docker.PoolName(hex.EncodeToString(suffix[:]))
	// Every capability whose probe a spec may ask for, so a hand-out finds them all proven for
	// the image and runs none.
	spec, err := sandbox.NewSpec(poolKind, sandbox.WithImage(p.image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
	if err != nil {
		return poolMember{}, err
	}
	pid, err := w.b.container(ctx, name)
	if err != nil {
		return poolMember{}, err
	}
	res, err := ask[*acquireResponse](ctx, w.b, name, pid, &request{msg: &acquireRequest{Spec: spec, Pool: p.id}}, 0)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		w.remove(name)
		return poolMember{}, fmt.Errorf("make pool member %s: %w", name, err)
	}
	return poolMember{name: name, id: res.InstanceID, made: time.Now()}, nil
}

// remove force-removes a member on its own bounded context; failures are logged (the reaper
// removes what is left by age).
func (w *warmPools) remove(target string) {
	ctx, cancel := context.WithTimeout(context.Background(), w.b.commandTimeout())
	defer cancel()
	if _, err := w.b.engine.Remove(ctx, target); err != nil {
		w.log.Warn("remove pool member", zap.String("container", target), zap.Error(err))
	}
}

// replaceStale removes the members that waited longer than the bound; refill replaces them.
func (w *warmPools) replaceStale(ctx context.Context) {
	cutoff := time.Now().Add(-w.maxWait)
	for _, p := range w.pools {
		for _, m := range p.takeOlder(cutoff) {
			if ctx.Err() != nil {
				return
			}
			w.log.Debug("pool member waited too long; replacing it", zap.String("container", m.name))
			w.remove(m.name)
		}
	}
}

// drain removes every waiting member (Close, after the loop has returned).
func (w *warmPools) drain() {
	<-w.done
	if err := w.spares(); err != nil {
		w.log.Debug("stop pool spares gauge", zap.Error(err))
	}
	for _, p := range w.pools {
		for _, m := range p.takeOlder(time.Now().Add(time.Hour)) {
			w.remove(m.name)
		}
	}
}

// adopt takes into their pools the waiting members a dead backend of this daemon left (one
// engine process drives one daemon). A stopped one, or one that waited too long, is removed.
// Members of a pool this backend does not have are left to the reaper.
func (w *warmPools) adopt(ctx context.Context) {
	// Only members made under this backend's own configuration labels: another engine on the
	// daemon with a pool of the same image keeps its members (it may be alive), and each test
	// process adopts only its own.
	filter := label.PoolFilter()
	maps.Copy(filter, w.b.cfg.Labels)
	ids, err := w.b.engine.ListContainerIDs(ctx, filter)
	if err != nil {
		w.log.Warn("list pool members to adopt", zap.Error(err))
		return
	}
	byID := map[string]*warmPool{}
	for _, p := range w.pools {
		byID[p.id] = p
	}
	cutoff := time.Now().Add(-w.maxWait)
	for _, id := range ids {
		r, err := w.b.engine.InspectContainerID(ctx, id)
		if err != nil || !docker.IsPoolName(r.Name) {
			continue // gone, or bound to a key: an ordinary sandbox now
		}
		p := byID[r.Labels[label.Pool]]
		if p == nil {
			continue
		}
		name := trimSlash(r.Name)
		made, perr := time.Parse(time.RFC3339Nano, r.Created)
		info, ierr := w.b.engine.Inspect(ctx, id)
		if perr != nil || made.Before(cutoff) || ierr != nil || !info.Running || p.full() {
			w.remove(name)
			continue
		}
		w.log.Info("pool member adopted", zap.String("container", name), zap.String("image", p.image))
		p.put(poolMember{name: name, id: r.ID, made: made})
	}
}

func trimSlash(name string) string {
	if len(name) > 0 && name[0] == '/' {
		return name[1:]
	}
	return name
}

// pool returns the pool that can serve spec with base, or nil. A spec asking for its own
// resource bounds takes no member: members are made with the configuration's.
func (w *warmPools) pool(spec sandbox.Spec, base string, egressID string) *warmPool {
	if w == nil || egressID != "" || spec.Egress == sandbox.EgressAllowlist || spec.ImageID != "" ||
		base != DefaultWorkDir || len(spec.Labels) > 0 || !spec.Resources.IsZero() {
		return nil
	}
	return w.pools[spec.Image]
}

func (p *warmPool) short() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle) < p.size
}

func (p *warmPool) full() bool { return !p.short() }

func (p *warmPool) put(m poolMember) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, m)
}

// take hands out the oldest member that has not waited too long.
func (p *warmPool) take(cutoff time.Time) (poolMember, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.idle {
		if !m.made.Before(cutoff) {
			p.idle = append(p.idle[:i:i], p.idle[i+1:]...)
			return m, true
		}
	}
	return poolMember{}, false
}

// takeOlder removes and returns the members made before cutoff.
func (p *warmPool) takeOlder(cutoff time.Time) []poolMember {
	p.mu.Lock()
	defer p.mu.Unlock()
	var old, kept []poolMember
	for _, m := range p.idle {
		if m.made.Before(cutoff) {
			old = append(old, m)
		} else {
			kept = append(kept, m)
		}
	}
	p.idle = kept
	return old
}

// fromPool hands the actor's name a member of the pool that serves m's spec: renamed by its
// pool name (a second claim of the same member finds no such name), bound to m's key, and
// read back. ok is false when no pool serves the spec or none had a usable member: the
// caller takes the cold path.
func (a *containerActor) fromPool(ctx context.Context, m *acquireRequest, base string) (_ *docker.ContainerInfo, ok bool) {
	w := a.b.pools
	p := w.pool(m.Spec, base, m.EgressID)
	if p == nil || m.Pool != "" {
		return nil, false
	}
	defer w.wake()
	for {
		mem, ok := p.take(time.Now().Add(-w.maxWait))
		if !ok {
			a.b.metrics.PoolTake(ctx, p.image, telemetry.PoolMiss)
			return nil, false
		}
		info, err := a.bindMember(ctx, mem, m)
		if errors.Is(err, docker.ErrConflict) {
			p.put(mem) // the name is someone else's now: the cold path adopts it
			return nil, false
		}
		if err != nil {
			a.log.Info("pool member not usable; trying another", zap.String("member", mem.name), zap.Error(err))
			continue
		}
		a.b.metrics.PoolTake(ctx, p.image, telemetry.PoolHit)
		a.log.Info("sandbox handed out from the warm pool", zap.String("kind", m.Spec.Kind), zap.String("member", mem.name))
		return info, true
	}
}

// bindMember records mem's binding, renames it to the actor's name and reads it back running.
// The binding is written first: from the rename on, any purge on the daemon (another
// conversation's included) reads it, and a derived name without one reads as the guest's
// tampering. A member whose rename fails keeps its pool name, so the binding it carries is
// nobody's to read until its next hand-out rewrites it. Whatever fails after the rename
// removes the container: it carries the name now.
func (a *containerActor) bindMember(ctx context.Context, mem poolMember, m *acquireRequest) (*docker.ContainerInfo, error) {
	a.forget()
	if err := a.writeBinding(ctx, mem.id, m.Key, m.Spec.Kind); err != nil {
		a.b.pools.remove(mem.id)
		return nil, err
	}
	if err := a.b.engine.Rename(ctx, mem.name, a.name); err != nil {
		if !errors.Is(err, docker.ErrConflict) {
			a.b.pools.remove(mem.id)
		}
		return nil, fmt.Errorf("rename %s: %w", mem.name, err)
	}
	info, err := a.refresh(ctx)
	if err == nil && (info == nil || info.ID != mem.id || !info.Running) {
		err = fmt.Errorf("%s is not the running member %s", a.name, mem.id)
	}
	if err != nil {
		a.removeContainer(mem.id)
		a.forget()
		return nil, err
	}
	return info, nil
}

// WarmPoolSpares reports the members waiting in each warm pool, by image; nil without a pool.
func (b *Backend) WarmPoolSpares() map[string]int {
	if b.pools == nil {
		return nil
	}
	return b.pools.sparesByImage()
}
