package sandbox

import (
	"context"
	"fmt"
	"slices"
)

// MaxForks bounds the keys of one [Router.Fork].
const MaxForks = 64

// Restore admits spec as [Router.Acquire] does, with [SnapshotFiles] required besides what it
// requires (so a backend that does not declare it is refused with
// [*CapabilityNotSupportedError], and a host that denies it with [*CapabilityDeniedError]),
// then asks the backend to put the sandbox of (key, spec.Kind) back to snapshot id: a new
// instance whose filesystem is the snapshot's. It is serialised with the acquires of that key
// and kind; the new instance counts as served by this router.
func (r *Router) Restore(ctx context.Context, key Key, spec Spec, id string) (Sandbox, error) {
	if err := CheckSnapshotID(id); err != nil {
		return nil, err
	}
	unlock, err := r.acquireLocks.lock(ctx, Identity(key, spec.Kind), r.opts.acquireWait, "restore of "+key.String())
	if err != nil {
		return nil, err
	}
	defer unlock()
	b, keeper, err := r.keeper(key, spec, SnapshotFiles)
	if err != nil {
		return nil, err
	}
	sb, err := keeper.Restore(ctx, key, spec.Clone(), id)
	if err != nil {
		return nil, err
	}
	r.remember(servedKey{Identity(key, spec.Kind), b.Name()}, sb.InstanceID())
	return sb, nil
}

// Fork admits spec as [Router.Acquire] does, with [SnapshotFiles] and [Fork] required besides,
// then asks the backend for one new sandbox per key, each from snapshot id. Keys must be
// distinct, at most [MaxForks]; each is serialised with its acquires. The new instances count
// as served by this router.
func (r *Router) Fork(ctx context.Context, id string, keys []Key, spec Spec) ([]Sandbox, error) {
	if err := CheckSnapshotID(id); err != nil {
		return nil, err
	}
	if len(keys) == 0 || len(keys) > MaxForks {
		return nil, &InvalidArgumentError{Reason: fmt.Sprintf("a fork makes 1 to %d sandboxes, got %d keys", MaxForks, len(keys))}
	}
	ids := make([]SandboxID, len(keys))
	for i, k := range keys {
		ids[i] = Identity(k, spec.Kind)
		if slices.Contains(ids[:i], ids[i]) {
			return nil, &InvalidArgumentError{Reason: fmt.Sprintf("a fork's keys must differ; %s is given twice", k)}
		}
	}
	// Locks in one order, so two forks over overlapping keys cannot wait for each other.
	order := slices.Clone(ids)
	slices.SortFunc(order, func(a, b SandboxID) int { return compareIdentity(a, b) })
	for _, sid := range order {
		unlock, err := r.acquireLocks.lock(ctx, sid, r.opts.acquireWait, "fork into "+sid.Key.String())
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	var b Backend
	var keeper SnapshotKeeper
	for _, k := range keys {
		var err error
		if b, keeper, err = r.keeper(k, spec, SnapshotFiles, Fork); err != nil {
			return nil, err
		}
	}
	sbs, err := keeper.Fork(ctx, id, slices.Clone(keys), spec.Clone())
	if err != nil {
		return nil, err
	}
	for i, sb := range sbs {
		r.remember(servedKey{ids[i], b.Name()}, sb.InstanceID())
	}
	return sbs, nil
}

// keeper routes spec with caps required besides its own, refuses what Acquire refuses of the
// key (unclean, a scope the key does not fit), and returns the backend as a SnapshotKeeper.
func (r *Router) keeper(key Key, spec Spec, caps ...Capability) (Backend, SnapshotKeeper, error) {
	if code, ok := r.uncleanCode(key); ok {
		return nil, nil, &UncleanError{Key: key, Code: code}
	}
	asked := spec.Clone()
	if spec.Valid() {
		asked.Requires = spec.Requires.Union(NewCapabilitySet(caps...))
	}
	b, err := r.route(asked)
	if err != nil {
		return nil, nil, err
	}
	scope := r.EffectiveIsolationScope(spec)
	if scope == ScopeCall && key.CallID == "" {
		return nil, nil, &InvalidArgumentError{Reason: "call-scoped workloads need a key with a CallID"}
	}
	if scope == ScopeConversation && key.CallID != "" {
		return nil, nil, &InvalidArgumentError{Reason: "a conversation-scoped workload was given a key with a CallID"}
	}
	keeper, ok := b.(SnapshotKeeper)
	if !ok {
		return nil, nil, &UnsupportedError{Backend: b.Name(), Op: "snapshots", Reason: "the backend declares snapshot capabilities but keeps no snapshots"}
	}
	return b, keeper, nil
}

func compareIdentity(a, b SandboxID) int {
	for _, p := range [][2]string{{a.Key.Scope, b.Key.Scope}, {a.Key.ThreadID, b.Key.ThreadID}, {a.Key.AgentID, b.Key.AgentID},
		{a.Key.CallID, b.Key.CallID}, {a.Kind, b.Kind}} {
		if p[0] < p[1] {
			return -1
		}
		if p[0] > p[1] {
			return 1
		}
	}
	return 0
}
