package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Router admits workloads to backends. It refuses, never degrades: no stronger-backend
// fallback, no clamped caps, no substituted egress mode. Its checks produce refusals or
// silence, nothing logged.
type Router struct {
	opts     routerOptions
	backends []Backend // every registered backend, asked on every disposal
	routable []Backend // backends that may serve specs (those clearing the floor)

	obs Observer // the observer, guarded; nil: no acts are built

	acquireLocks keyLock[SandboxID]
	disposeLocks keyLock[Key]

	mu      sync.Mutex
	unclean map[Key]DisposalCode
	served  map[servedKey]map[string]struct{} // instance IDs this router has handed out
}

type servedKey struct {
	id      SandboxID
	backend string
}

// NewRouter builds a router over backends. With no backends the router is disabled. A fixed
// selection whose backend is below the isolation floor fails here with
// [*BackendNotPermittedError]: a misconfiguration must not start.
func NewRouter(backends []Backend, opts ...RouterOption) (*Router, error) {
	o := defaultRouterOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	r := &Router{opts: o, backends: slices.Clone(backends), obs: guard(o.observer, o.logger),
		unclean: map[Key]DisposalCode{}, served: map[servedKey]map[string]struct{}{}}
	if o.selected != "" && o.selection == SelectionPerSpec {
		return nil, &InvalidArgumentError{Reason: "a selected backend cannot be combined with per_spec selection"}
	}
	if len(backends) == 0 {
		return r, nil
	}
	for _, b := range backends {
		if hasLegacyDeclarations(b) {
			return nil, &BackendNotPermittedError{Backend: b.Name(), Reason: "it exposes the legacy declaration attributes; " +
				"describe it with one Declarations value instead"}
		}
	}
	switch o.selection {
	case SelectionFixed:
		b, err := r.lookup(o.selected)
		if err != nil {
			return nil, err
		}
		if err := r.checkFloor(b, o.minIsolation); err != nil {
			return nil, err
		}
		r.routable = []Backend{b}
	case SelectionPerSpec:
		var below []string
		for _, b := range backends {
			if r.checkFloor(b, o.minIsolation) == nil {
				r.routable = append(r.routable, b)
			} else {
				below = append(below, b.Name())
			}
		}
		if len(r.routable) == 0 {
			return nil, r.checkFloor(backends[0], o.minIsolation)
		}
		if len(below) > 0 {
			o.logger.Warn("backends below the isolation floor are kept for disposal only",
				zap.Strings("backends", below), zap.String("floor", string(o.minIsolation)))
		}
	}
	if err := r.handOutReporter(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Router) lookup(name string) (Backend, error) {
	if name == "" {
		return r.backends[0], nil
	}
	for _, b := range r.backends {
		if b.Name() == name {
			return b, nil
		}
	}
	names := make([]string, len(r.backends))
	for i, b := range r.backends {
		names[i] = b.Name()
	}
	return nil, &NoBackendError{Selected: name, Registered: names}
}

// handOutReporter gives every reporting backend the router's observer, guarded (nil without
// one, which switches their reports and egress reads off), all or nothing.
func (r *Router) handOutReporter() error {
	type swapped struct {
		b    Reporting
		prev Observer
	}
	var done []swapped
	for _, b := range r.backends {
		rb, ok := b.(Reporting)
		if !ok {
			continue
		}
		prev, err := rb.ReportTo(r.obs)
		if err != nil {
			for _, s := range slices.Backward(done) {
				_, _ = s.b.ReportTo(s.prev)
			}
			return fmt.Errorf("hand the observer to %s: %w", b.Name(), err)
		}
		done = append(done, swapped{rb, prev})
	}
	return nil
}

// Observer is the router's observer, guarded as the router delivers to it (a panic is
// contained and logged), for an API in front of the router to report its own acts to; nil
// when the router has none.
func (r *Router) Observer() Observer { return r.obs }

// Enabled reports whether any backend is registered.
func (r *Router) Enabled() bool { return len(r.backends) > 0 }

// Backend is the fixed backend, or nil when disabled or selecting per spec.
func (r *Router) Backend() Backend {
	if r.opts.selection != SelectionFixed || len(r.routable) == 0 {
		return nil
	}
	return r.routable[0]
}

// BackendFor is the backend that would serve spec, or nil. It never errors.
func (r *Router) BackendFor(spec Spec) Backend {
	b, err := r.route(spec)
	if err != nil {
		return nil
	}
	return b
}

// EnsureCanServe runs every admission check without acquiring anything. With no backend it
// returns nil: nothing runs.
func (r *Router) EnsureCanServe(spec Spec) error {
	if !r.Enabled() {
		return nil
	}
	_, err := r.route(spec)
	return err
}

// EffectiveIsolationScope is the stricter of the host's and the spec's scope.
func (r *Router) EffectiveIsolationScope(spec Spec) IsolationScope {
	if spec.IsolationScope.Rank() > r.opts.minIsolationScope.Rank() {
		return spec.IsolationScope
	}
	return r.opts.minIsolationScope
}

// EffectiveCleanup is the weakest cleanup rung the serving backend establishes at or above
// the stricter of the host's and the spec's floor; call scope always disposes.
func (r *Router) EffectiveCleanup(spec Spec) (Cleanup, error) {
	b, err := r.route(spec)
	if err != nil {
		return "", err
	}
	return r.cleanupFor(b, spec), nil
}

func (r *Router) cleanupFor(b Backend, spec Spec) Cleanup {
	if r.EffectiveIsolationScope(spec) == ScopeCall {
		return CleanupDispose
	}
	floor := r.opts.minCleanup
	if spec.MinCleanup != nil && spec.MinCleanup.Rank() > floor.Rank() {
		floor = *spec.MinCleanup
	}
	caps := b.Declarations().EffectiveCapabilities()
	established := map[Cleanup]bool{
		CleanupDispose: true,
		CleanupReset:   caps.Has(Snapshot),
		CleanupReclaim: caps.Has(Reclaim),
	}
	for _, c := range Cleanups() {
		if c.Rank() >= floor.Rank() && established[c] {
			return c
		}
	}
	return CleanupDispose
}

// route applies the denials, then checks 1-7 against the candidates: the fixed backend, or
// the first registered backend that passes under per-spec selection.
func (r *Router) route(spec Spec) (Backend, error) {
	if !spec.Valid() {
		return nil, &InvalidArgumentError{Reason: "the spec was not built by sandbox.NewSpec"}
	}
	if len(r.routable) == 0 {
		return nil, &NoBackendError{}
	}
	if denied := spec.RequiredCapabilities().Intersect(r.opts.deniedCaps); len(denied) > 0 {
		return nil, &CapabilityDeniedError{Denied: denied.Sorted(), Kind: spec.Kind}
	}
	var deniedIDs []ToolIdentity
	for _, id := range spec.Identities() {
		if _, ok := r.opts.deniedIdentities[id]; ok {
			deniedIDs = append(deniedIDs, id)
		}
	}
	if len(deniedIDs) > 0 {
		return nil, &IdentityDeniedError{Identities: deniedIDs, Kind: spec.Kind}
	}
	var first error
	var refusedBy []string
	for _, b := range r.routable {
		err := r.admit(b, spec)
		if err == nil {
			return b, nil
		}
		if first == nil {
			first = err
		}
		refusedBy = append(refusedBy, b.Name())
	}
	if len(refusedBy) > 1 {
		return nil, &routeRefusedError{err: first, others: refusedBy[1:]}
	}
	return nil, first
}

// routeRefusedError keeps the first candidate's refusal (its type is what callers match)
// while naming the other candidates that refused too.
type routeRefusedError struct {
	err    error
	others []string
}

func (e *routeRefusedError) Error() string {
	return e.err.Error() + " (also refused by " + strings.Join(e.others, ", ") + ")"
}

func (e *routeRefusedError) Unwrap() error { return e.err }

func (r *Router) checkFloor(b Backend, floor Isolation) error {
	if !MeetsFloor(b.Isolation(), floor) {
		return &BackendNotPermittedError{Backend: b.Name(), Declared: b.Isolation(), Floor: floor}
	}
	return nil
}

// admit runs checks 1-7 of the admission table, in order, against one backend.
func (r *Router) admit(b Backend, spec Spec) error {
	floor := r.opts.minIsolation
	if spec.MinIsolation != nil && spec.MinIsolation.Rank() > floor.Rank() {
		floor = *spec.MinIsolation
	}
	if err := r.checkFloor(b, floor); err != nil { // 1
		return err
	}
	d := b.Declarations()
	caps := d.EffectiveCapabilities()
	if missing := spec.RequiredCapabilities().Minus(caps); len(missing) > 0 { // 2
		return &CapabilityNotSupportedError{Backend: b.Name(), Missing: missing.Sorted(), Kind: spec.Kind, Declared: caps}
	}
	if err := checkEgressRules(b, spec, d, caps); err != nil { // 2b
		return err
	}
	if spec.RequiresOSFamily != nil && !d.ServesOS(*spec.RequiresOSFamily) { // 3
		return &OSFamilyNotSupportedError{Backend: b.Name(), Families: d.OSFamilies, Requested: *spec.RequiresOSFamily}
	}
	limits := d.EffectiveLimits() // 4
	in, out := foldHostToolTraffic(spec)
	if !in.Within(limits.FilesIn) {
		return &TransferLimitsNotPermittedError{Backend: b.Name(), Direction: string(FilesIn), Asked: in, Permitted: limits.FilesIn}
	}
	if !out.Within(limits.FilesOut) {
		return &TransferLimitsNotPermittedError{Backend: b.Name(), Direction: string(FilesOut), Asked: out, Permitted: limits.FilesOut}
	}
	if err := checkResources(b, spec, d); err != nil { // 4b
		return err
	}
	if !d.EgressModes.Has(spec.Egress) { // 5
		return &EgressNotEnforcedError{Backend: b.Name(), Mode: spec.Egress, Kind: spec.Kind, Enforced: d.EgressModes.Sorted()}
	}
	scope := r.EffectiveIsolationScope(spec) // 6
	if !slices.Contains(d.EffectiveIsolationScopes(), scope) {
		return &ScopeNotEnforcedError{Backend: b.Name(), Scope: scope}
	}
	if spec.RequiredCapabilities().Has(AttachedIdentity) { // 7
		if d.AttachedIdentity == nil {
			return &AttachedIdentityNotPermittedError{Bound: fmt.Sprintf("backend %q attaches no identity", b.Name())}
		}
		return &AttachedIdentityNotPermittedError{Bound: "this host permits no attached identity to be shared"}
	}
	return nil
}

// checkResources refuses a spec asking for more memory, CPUs or processes than the backend
// permits one sandbox, or asking for any bound of a backend that declares none.
func checkResources(b Backend, spec Spec, d Declarations) error {
	if spec.Resources.IsZero() {
		return nil
	}
	if d.Resources == nil {
		return &ResourcesNotPermittedError{Backend: b.Name()}
	}
	if name, asked, bound := spec.Resources.exceeds(*d.Resources); name != "" {
		return &ResourcesNotPermittedError{Backend: b.Name(), Resource: name, Asked: asked, Permitted: bound}
	}
	return nil
}

// foldHostToolTraffic adds the host-tool transport's worst case to the spec's caps for the
// limits check only: responses travel into the guest, requests out of it.
func foldHostToolTraffic(spec Spec) (in, out TransferLimits) {
	in, out = spec.FilesIn, spec.FilesOut
	if spec.HostTools == nil {
		return in, out
	}
	rl := spec.HostTools.ResponseLimits
	in.MaxBytesPerFile = max(in.MaxBytesPerFile, rl.MaxBytesPerFile)
	in.MaxTotalBytes += rl.MaxTotalBytes
	in.MaxFiles += rl.MaxFiles
	calls := int64(spec.HostTools.MaxCallsPerRun)
	out.MaxFiles += calls
	return in, out
}

// Acquire admits spec and gets or creates the sandbox of (key, spec.Kind). Acquires of one
// key and kind are serialised; a key whose last disposal failed is refused with
// [*UncleanError] until a disposal lands.
func (r *Router) Acquire(ctx context.Context, key Key, spec Spec) (Sandbox, error) {
	id := Identity(key, spec.Kind)
	unlock, err := r.acquireLocks.lock(ctx, id, r.opts.acquireWait, "acquire of "+key.String())
	if err != nil {
		return nil, err
	}
	defer unlock()

	start := time.Now()
	var untrusted untrustedReport
	sb, b, err := r.acquire(ctx, key, spec, &untrusted)
	if r.obs != nil {
		r.obs.SandboxAcquired(ctx, acquiredAct(key, spec, sb, b, err, untrusted, time.Since(start)))
	}
	return sb, err
}

// untrustedReport is what an acquire did with an instance it did not trust (§8.3 step 7).
type untrustedReport struct {
	instance string // "" when it trusted the one it found
	outcome  string // OutcomeReset or OutcomeReplaced
}

// acquiredAct is the act of one acquire: how the backend got the instance (an [Acquired]
// sandbox says; else created or reused as [Fresh] says), outranked by what the router did
// with an untrusted one, which the backend never saw.
func acquiredAct(key Key, spec Spec, sb Sandbox, b Backend, err error, u untrustedReport, took time.Duration) SandboxAcquired {
	a := SandboxAcquired{Act: Act{Key: key, Kind: spec.Kind, Took: took, Err: err}, Image: spec.Image, Egress: spec.Egress}
	if b != nil {
		a.Backend = b.Name()
	}
	if err != nil {
		return a
	}
	a.InstanceID, a.Outcome = sb.InstanceID(), OutcomeReused
	if created(sb) {
		a.Outcome = OutcomeCreated
	}
	if r, ok := sb.(Acquired); ok {
		if r.AcquireOutcome() != "" {
			a.Outcome = r.AcquireOutcome()
		}
		a.ImageID = r.ImageID()
	}
	if u.instance != "" {
		a.Outcome, a.Untrusted = u.outcome, u.instance
	}
	return a
}

func (r *Router) acquire(ctx context.Context, key Key, spec Spec, untrustedRep *untrustedReport) (Sandbox, Backend, error) {
	if len(r.routable) == 0 {
		return nil, nil, &NoBackendError{}
	}
	if code, ok := r.uncleanCode(key); ok {
		return nil, nil, &UncleanError{Key: key, Code: code}
	}
	b, err := r.route(spec)
	if err != nil {
		return nil, nil, err
	}
	scope := r.EffectiveIsolationScope(spec)
	if scope == ScopeCall && key.CallID == "" {
		return nil, b, &InvalidArgumentError{Reason: "call-scoped workloads need a key with a CallID"}
	}
	if scope == ScopeConversation && key.CallID != "" {
		return nil, b, &InvalidArgumentError{Reason: "a conversation-scoped workload was given a key with a CallID"}
	}
	spec = spec.Clone()
	sb, err := r.acquireChecked(ctx, b, key, spec)
	if err != nil || scope != ScopeConversation {
		return sb, b, err
	}
	sk := servedKey{Identity(key, spec.Kind), b.Name()}
	if !r.wasServed(sk, sb.InstanceID()) && !created(sb) {
		// An instance this router never handed out may hold another process's leftovers.
		untrusted := sb.InstanceID()
		if b.Declarations().EffectiveCapabilities().Has(Snapshot) {
			if err := sb.Reset(ctx, r.opts.reclaimTimeout); err != nil {
				// A failed reset escalates to disposing that exact instance; only a failed
				// disposal leaves the key unclean.
				if f := r.disposeInstance(ctx, b, key, spec.Kind, sb.InstanceID()); f != nil {
					return nil, b, &UncleanError{Key: key, Code: f.Code}
				}
				return nil, b, fmt.Errorf("reset untrusted instance: %w", err)
			}
			*untrustedRep = untrustedReport{untrusted, OutcomeReset}
		} else {
			if f := r.disposeInstance(ctx, b, key, spec.Kind, sb.InstanceID()); f != nil {
				return nil, b, &UncleanError{Key: key, Code: f.Code}
			}
			if sb, err = r.acquireChecked(ctx, b, key, spec); err != nil {
				return nil, b, err
			}
			*untrustedRep = untrustedReport{untrusted, OutcomeReplaced}
		}
	}
	r.remember(sk, sb.InstanceID())
	return sb, b, nil
}

// acquireChecked runs the backend's acquire and the checks that follow it: the key turning
// unclean meanwhile, and an empty instance ID.
func (r *Router) acquireChecked(ctx context.Context, b Backend, key Key, spec Spec) (Sandbox, error) {
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		return nil, err
	}
	if code, ok := r.uncleanCode(key); ok {
		r.disposeInstance(ctx, b, key, spec.Kind, sb.InstanceID())
		return nil, &UncleanError{Key: key, Code: code}
	}
	if sb.InstanceID() == "" {
		r.disposeInstance(ctx, b, key, spec.Kind, "")
		return nil, &ProtocolError{Backend: b.Name(), Reason: "acquire returned a sandbox with an empty instance ID"}
	}
	return sb, nil
}

// Fresh is implemented by sandboxes that know whether the acquire returning them created
// the instance. A created instance is trusted by the router although it never served it.
type Fresh interface {
	Created() bool
}

// Acquire outcomes, as an [Acquired] sandbox reports how its acquire got the instance.
const (
	OutcomeCreated   = "created"   // a new instance
	OutcomeReused    = "reused"    // a running instance, handed out again
	OutcomeRestarted = "restarted" // a stopped instance, started again
	OutcomeAdopted   = "adopted"   // an instance another acquire made meanwhile (a name conflict)
)

// Acquired is implemented by sandboxes that know how the acquire returning them got the
// instance (one of the Outcome constants) and which image it runs (the daemon's image ID;
// "" when unknown). An untrusted instance the router reset or replaced is not the backend's
// to know: the router's [SandboxAcquired] says so.
type Acquired interface {
	AcquireOutcome() string
	ImageID() string
}

// What the router did with an untrusted instance (§8.3 step 7): one it never handed out and
// the acquire did not create, so it may hold another process's leftovers.
const (
	OutcomeReset    = "reset"    // reset to its snapshot in place
	OutcomeReplaced = "replaced" // disposed, and a new instance created in its place
)

func created(sb Sandbox) bool {
	f, ok := sb.(Fresh)
	return ok && f.Created()
}

func (r *Router) disposeInstance(ctx context.Context, b Backend, key Key, kind, instanceID string) *DisposalFailure {
	f := r.safeDispose(ctx, b, key, DisposeOptions{Kind: &kind, InstanceID: instanceID})
	if f != nil {
		r.markUnclean(key, f.Code)
	}
	return f
}

// Dispose deletes the key's sandboxes on every registered backend (a conversation may have
// been served while another was configured). It never fails the caller: what may remain is
// folded into the returned failure. A landing disposal of the whole key (zero opts) reopens
// an unclean key; a narrowed one does not, since the ledger does not record which kind or
// instance failed and a key reopens only when every failed target is gone.
func (r *Router) Dispose(ctx context.Context, key Key, opts DisposeOptions) *DisposalFailure {
	start := time.Now()
	unlock, err := r.disposeLocks.lock(ctx, key, 0, "disposal of "+key.String())
	if err != nil {
		return &DisposalFailure{Code: DisposalUnknown, Detail: err.Error()}
	}
	defer unlock()
	var failures []DisposalFailure
	for _, b := range r.backends {
		if f := r.safeDispose(ctx, b, key, opts); f != nil {
			failures = append(failures, *f)
		}
	}
	folded := FoldDisposalFailures(failures)
	if folded == nil && opts.Kind == nil && opts.InstanceID == "" {
		r.clearUnclean(func(k Key) bool { return k == key })
	}
	if r.obs != nil {
		a := SandboxDisposed{Act: Act{Key: key, InstanceID: opts.InstanceID, Took: time.Since(start)}, Undisposed: folded}
		if opts.Kind != nil {
			a.Kind = *opts.Kind
		}
		if len(r.backends) == 1 {
			a.Backend = r.backends[0].Name()
		}
		r.obs.SandboxDisposed(ctx, a)
	}
	return folded
}

func (r *Router) safeDispose(ctx context.Context, b Backend, key Key, opts DisposeOptions) (f *DisposalFailure) {
	defer func() {
		if p := recover(); p != nil {
			f = &DisposalFailure{Code: DisposalUnknown, Detail: fmt.Sprintf("%s panicked: %v", b.Name(), p)}
		}
		if f != nil {
			r.opts.logger.Warn("dispose", zap.String("key", key.String()), zap.String("backend", b.Name()),
				zap.String("code", string(f.Code)), zap.String("detail", f.Detail))
		}
	}()
	return b.Dispose(ctx, key, opts)
}

// DisposeScope deletes every sandbox of a conversation on every registered backend, summing
// the counts. It never fails the caller; a clean purge reopens the conversation's keys.
func (r *Router) DisposeScope(ctx context.Context, scope, threadID string) ScopePurge {
	start := time.Now()
	var total ScopePurge
	var failures []DisposalFailure
	for _, b := range r.backends {
		p := func() (p ScopePurge) {
			defer func() {
				if v := recover(); v != nil {
					p = ScopePurge{Undisposed: &DisposalFailure{Code: DisposalUnknown, Detail: fmt.Sprintf("%s panicked: %v", b.Name(), v)}}
				}
			}()
			return b.DisposeScope(ctx, scope, threadID)
		}()
		total.Disposed += p.Disposed
		if p.Undisposed != nil {
			failures = append(failures, *p.Undisposed)
			r.opts.logger.Warn("dispose scope", zap.String("scope", scope), zap.String("backend", b.Name()),
				zap.String("code", string(p.Undisposed.Code)), zap.String("detail", p.Undisposed.Detail))
		}
	}
	total.Undisposed = FoldDisposalFailures(failures)
	if total.Undisposed == nil {
		r.clearUnclean(func(k Key) bool { return k.Scope == scope && k.ThreadID == threadID })
	}
	if r.obs != nil {
		a := ScopeDisposed{Act: Act{Key: Key{Scope: scope, ThreadID: threadID}, Took: time.Since(start)}, Purge: total}
		if len(r.backends) == 1 {
			a.Backend = r.backends[0].Name()
		}
		r.obs.ScopeDisposed(ctx, a)
	}
	return total
}

// ScopeDisposal is what the disposal after a [Router.Scope] body did.
type ScopeDisposal struct {
	Disposed   int
	Undisposed *DisposalFailure
}

// Scope runs body and always disposes the conversation afterwards, also when body panics
// (the panic then continues). Disposal trouble never replaces the body's error.
func (r *Router) Scope(ctx context.Context, scope, threadID string, body func(context.Context) error) (d ScopeDisposal, err error) {
	defer func() { d = ScopeDisposal(r.DisposeScope(context.WithoutCancel(ctx), scope, threadID)) }()
	return ScopeDisposal{}, body(ctx)
}

// PurgeScopedThread disposes a deleted conversation's sandboxes. It never fails the caller's
// delete; it returns how many were disposed.
func (r *Router) PurgeScopedThread(ctx context.Context, scope, threadID string) int {
	p := r.DisposeScope(ctx, scope, threadID)
	if p.Disposed > 0 {
		r.opts.logger.Info("purged conversation sandboxes", zap.String("scope", scope), zap.Int("disposed", p.Disposed))
	}
	return p.Disposed
}

// Unclean reports the disposal code that keeps key refused, if any.
func (r *Router) Unclean(key Key) (DisposalCode, bool) { return r.uncleanCode(key) }

func (r *Router) uncleanCode(key Key) (DisposalCode, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.unclean[key]
	return c, ok
}

func (r *Router) markUnclean(key Key, code DisposalCode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unclean[key] = code
}

func (r *Router) clearUnclean(match func(Key) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.unclean {
		if match(k) {
			delete(r.unclean, k)
		}
	}
}

// Vouch records instanceID as served for (key, kind) on the backend named backend, as if this
// router had handed it out: the next acquire that finds it adopts it instead of treating it as
// untrusted (§8.3 step 7). It is for a process that took a sandbox over from another that
// served it — an engine of a cluster whose placement record names the instance its lapsed
// owner handed out — and for nothing a caller merely claims.
func (r *Router) Vouch(key Key, kind, backend, instanceID string) {
	if instanceID == "" {
		return
	}
	r.remember(servedKey{Identity(key, kind), backend}, instanceID)
}

func (r *Router) wasServed(k servedKey, instanceID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.served[k][instanceID]
	return ok
}

func (r *Router) remember(k servedKey, instanceID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.served[k] == nil {
		r.served[k] = map[string]struct{}{}
	}
	r.served[k][instanceID] = struct{}{}
}

// checkEgressRules is admission check 2b: every method an inspecting rule names is a token
// the backend enforces, and a rule with paths needs a backend that enforces paths.
func checkEgressRules(b Backend, spec Spec, d Declarations, caps CapabilitySet) error {
	for _, rule := range spec.EgressAllow {
		for _, m := range rule.Methods {
			if !slices.Contains(d.EgressMethodTokens, m) {
				return &CapabilityNotSupportedError{Backend: b.Name(), Missing: []Capability{EgressMethods}, Kind: spec.Kind,
					Declared: caps, Reason: fmt.Sprintf("method %s for host %q is not a token it enforces", m, rule.Host)}
			}
		}
		if len(rule.Paths) > 0 && !d.EgressPaths {
			return &CapabilityNotSupportedError{Backend: b.Name(), Missing: []Capability{EgressMethods}, Kind: spec.Kind,
				Declared: caps, Reason: fmt.Sprintf("it enforces no path patterns (host %q names paths)", rule.Host)}
		}
	}
	return nil
}
