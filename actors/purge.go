package actors

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// Dispose removes the key's containers (every kind, or opts.Kind), found by label through the
// engine, with this process's own record as the fallback for what the listing misses. It
// never fails the caller: what may remain comes back as a [sandbox.DisposalFailure].
func (b *Backend) Dispose(ctx context.Context, key sandbox.Key, opts sandbox.DisposeOptions) *sandbox.DisposalFailure {
	fallback := b.takeRegistered(func(id sandbox.SandboxID) bool {
		return id.Key == key && (opts.Kind == nil || id.Kind == *opts.Kind)
	}, key)
	if opts.InstanceID != "" {
		return b.disposeInstance(ctx, key, opts)
	}
	_, failure := b.purge(ctx, label.KeyFilter(key, opts.Kind), keyMatch(key, opts.Kind), fallback, key, &key)
	return failure
}

// DisposeScope removes every container of a conversation, by label alone (another process
// or replica may have made them) plus this process's record.
func (b *Backend) DisposeScope(ctx context.Context, scope, threadID string) sandbox.ScopePurge {
	fallback := b.takeRegistered(func(id sandbox.SandboxID) bool {
		return id.Key.Scope == scope && id.Key.ThreadID == threadID
	}, sandbox.Key{})
	match := func(p poolBinding) bool { return p.Scope == scope && p.Thread == threadID }
	n, failure := b.purge(ctx, label.ScopeFilter(scope, threadID), match, fallback, sandbox.Key{Scope: scope, ThreadID: threadID}, nil)
	return sandbox.ScopePurge{Disposed: n, Undisposed: failure}
}

// takeRegistered removes and returns the names this process recorded for matching
// identities, plus the names retained after failed removals of key.
func (b *Backend) takeRegistered(match func(sandbox.SandboxID) bool, key sandbox.Key) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	for id, set := range b.acquired {
		if match(id) {
			for n := range set {
				names = append(names, n)
			}
			delete(b.acquired, id)
		}
	}
	for k, set := range b.retained {
		if k == key || match(sandbox.SandboxID{Key: k}) {
			for n := range set {
				names = append(names, n)
			}
			delete(b.retained, k)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func (b *Backend) retain(key sandbox.Key, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retained[key] == nil {
		b.retained[key] = map[string]struct{}{}
	}
	b.retained[key][name] = struct{}{}
}

// purge is the shared sweep: list containers and networks by label, add the fallback names,
// then hand each sandbox to its container actor, keyed by the workload's name, which tears it
// down in the one order of egress-and-reap.md §1.9 (proxy drained and removed, workload,
// network last) and so never overtakes that sandbox's acquire or any other call in progress.
// A listed proxy or network whose workload is gone goes to the actor of its base name all the
// same. It counts only
// workloads that were actually there; a failed name is retained for the next sweep. caller
// is the key of a key-addressed purge (Dispose), nil for a sweep of a conversation
// (DisposeScope): an empty agent_id is a key like any other, so it cannot tell them apart.
func (b *Backend) purge(ctx context.Context, filter map[string]string, match func(poolBinding) bool, fallback []string,
	owner sandbox.Key, caller *sandbox.Key) (int, *sandbox.DisposalFailure) {
	var failures []sandbox.DisposalFailure
	networks := make(chan []string, 1)
	go func() { networks <- b.networkNames(ctx, filter) }()
	type pooledList struct {
		names    []string
		failures []sandbox.DisposalFailure
	}
	pooled := make(chan pooledList, 1)
	go func() { n, f := b.pooledNames(ctx, match); pooled <- pooledList{n, f} }()
	listed, err := b.engine.ListNames(ctx, filter, "^"+docker.NamePrefix)
	if err != nil {
		failures = append(failures, sandbox.DisposalFailure{Code: sandbox.DisposalUnlisted,
			Detail: fmt.Sprintf("could not list containers, so the sweep may be partial: %v", err)})
	}
	listed = append(listed, <-networks...)
	p := <-pooled
	listed = append(listed, p.names...)
	failures = append(failures, p.failures...)
	disposed := 0
	for _, n := range purgeTargets(append(listed, fallback...)) {
		res := b.teardown(ctx, n, &disposeRequest{Caller: caller, Trigger: purgeTrigger(caller)})
		if res.Failure != nil {
			failures = append(failures, *res.Failure)
			b.retain(owner, n)
			b.log.Warn("dispose", zap.String("container", n), zap.String("code", string(res.Failure.Code)), zap.String("detail", res.Failure.Detail))
			continue
		}
		if res.Removed {
			disposed++
		}
	}
	return disposed, sandbox.FoldDisposalFailures(failures)
}

// pooledNames lists the warm pool's members bound to a key (pool_binding.go) whose binding
// match selects or cannot be believed: a purge reaches a pooled sandbox by its binding, as it
// reaches the others by their labels. A member still waiting for a key is nobody's.
func (b *Backend) pooledNames(ctx context.Context, match func(poolBinding) bool) ([]string, []sandbox.DisposalFailure) {
	names, err := b.engine.ListNames(ctx, label.PoolFilter(), "^"+docker.NamePrefix)
	if err != nil {
		return nil, []sandbox.DisposalFailure{{Code: sandbox.DisposalUnlisted,
			Detail: fmt.Sprintf("could not list pooled sandboxes, so the sweep may be partial: %v", err)}}
	}
	var out []string
	var failures []sandbox.DisposalFailure
	for _, n := range names {
		n = trimSlash(n)
		if _, role, ok := docker.ParseName(n); !ok || role != docker.RoleWorkload {
			continue
		}
		p, ok, err := b.readBinding(ctx, n)
		switch {
		case err != nil && isNotFound(err):
		case err != nil:
			failures = append(failures, *disposalFailure(n, err))
		case !ok || match(p):
			if !ok {
				b.log.Warn("pooled sandbox with a binding that cannot be believed: purged", zap.String("container", n))
			}
			out = append(out, n)
		}
	}
	return out, failures
}

// pooledMatch reports whether the bound pool member name is match's, or has a binding that
// cannot be believed (fail closed).
func (b *Backend) pooledMatch(ctx context.Context, name string, match func(poolBinding) bool) bool {
	name = trimSlash(name)
	if _, role, ok := docker.ParseName(name); !ok || role != docker.RoleWorkload {
		return false
	}
	p, ok, err := b.readBinding(ctx, name)
	return err == nil && (!ok || match(p))
}

// keyMatch selects the bindings KeyFilter(key, kind) would select by labels.
func keyMatch(key sandbox.Key, kind *string) func(poolBinding) bool {
	return func(p poolBinding) bool {
		return p.Scope == key.Scope && p.Thread == key.ThreadID && p.Agent == key.AgentID &&
			(key.CallID == "" || p.Call == key.CallID) && (kind == nil || p.Kind == *kind)
	}
}

// networkNames lists the derived networks filter matches, by name. An engine that died
// between its proxy's removal and its network's left a network that no container names any
// more; listing it sends it to its base's actor, whose teardown removes it. A network that
// cannot be listed or read is a logged leak, as one that cannot be removed is (§1.9).
func (b *Backend) networkNames(ctx context.Context, filter map[string]string) []string {
	ids, err := b.engine.ListNetworkIDs(ctx, filter)
	if err != nil {
		b.log.Warn("list the sweep's networks", zap.Error(err))
		return nil
	}
	var names []string
	for _, id := range ids {
		r, err := b.engine.InspectNetworkID(ctx, id)
		if err != nil {
			if !isNotFound(err) {
				b.log.Warn("inspect a network of the sweep", zap.String("network", id), zap.Error(err))
			}
			continue
		}
		if _, role, ok := docker.ParseName(r.Name); ok && role == docker.RoleNetworkName {
			names = append(names, r.Name)
		}
	}
	return names
}

// teardown asks the actor of the workload name n to tear its sandbox down.
func (b *Backend) teardown(ctx context.Context, n string, req *disposeRequest) *disposeResponse {
	target := n
	if req.InstanceID != "" {
		target = req.InstanceID
	}
	pid, err := b.container(ctx, n)
	var res *disposeResponse
	if err == nil {
		res, err = ask[*disposeResponse](ctx, b, n, pid, &request{msg: req}, 0)
	}
	if err != nil {
		return &disposeResponse{Failure: disposalFailure(target, err)}
	}
	return res
}

// purgeTargets returns the distinct workload names behind listed names, in order: a derived
// proxy or network name stands for its base (so an orphan proxy is still drained and
// removed, by its base's actor); a name that is not derived is a workload of its own, and a
// proxy-suffixed one that is not derived is left alone.
func purgeTargets(names []string) []string {
	var out []string
	for _, n := range names {
		if base, _, ok := docker.ParseName(n); ok {
			n = base
		} else if isProxyName(n) {
			continue
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// purgeTrigger names the cleanup path in the drained windows.
func purgeTrigger(caller *sandbox.Key) egresslog.Trigger {
	if caller == nil {
		return egresslog.TriggerDisposeScope
	}
	return egresslog.TriggerDispose
}

// disposeInstance removes exactly one instance, by its full ID, when its ownership labels
// name key (and the kind, when given), through the actor of its name, which removes its proxy
// first and its network last. Names are never used to remove here: they can be reused.
func (b *Backend) disposeInstance(ctx context.Context, key sandbox.Key, opts sandbox.DisposeOptions) *sandbox.DisposalFailure {
	info, err := b.engine.Inspect(ctx, opts.InstanceID)
	switch {
	case err != nil && isNotFound(err):
		return nil
	case err != nil:
		return disposalFailure(opts.InstanceID, err)
	case info.ID != opts.InstanceID:
		return &sandbox.DisposalFailure{Code: sandbox.DisposalUnlisted, Detail: fmt.Sprintf("%s is not a full instance ID", opts.InstanceID)}
	case isProxyName(info.Name):
		return nil
	}
	if _, pooled := info.Labels[label.Pool]; pooled {
		if !b.pooledMatch(ctx, info.Name, keyMatch(key, opts.Kind)) {
			return nil
		}
	} else {
		for k, v := range label.KeyFilter(key, opts.Kind) {
			if info.Labels[k] != v {
				return nil
			}
		}
	}
	caller := &key
	res := b.teardown(ctx, info.Name, &disposeRequest{InstanceID: info.ID, Caller: caller, Trigger: egresslog.TriggerDispose})
	if res.Failure != nil {
		b.retain(key, info.Name)
	}
	return res.Failure
}
