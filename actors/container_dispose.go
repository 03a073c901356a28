package actors

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// disposeRequest asks a container actor to take its sandbox down in the teardown order of
// egress-and-reap.md §1.9: proxy (drained), workload, network. With an InstanceID it removes
// only that instance, its proxy and its network (docker-backend §14.4); without one it removes
// whatever holds the names (a purge). Caller is the key of a key-addressed disposal, which may
// stand in for a proxy's attribution (§3.5); nil for a sweep of a conversation. Trigger names
// the path in the published window.
type disposeRequest struct {
	InstanceID string
	Caller     *sandbox.Key
	Trigger    egresslog.Trigger
}

// disposeResponse says what the removal found. Removed counts only a container that was
// there; Failure is set when something may remain.
type disposeResponse struct {
	Removed bool
	Failure *sandbox.DisposalFailure
}

func (*disposeRequest) needsFreeze() bool { return false }

func (*disposeRequest) fail(err error) any {
	return &disposeResponse{Failure: &sandbox.DisposalFailure{Code: sandbox.DisposalUnknown, Detail: err.Error()}}
}

func (m *disposeRequest) run(ctx context.Context, a *containerActor, _ actor.Context, _ *request, reply func(any)) {
	res := a.dispose(ctx, m)
	reply(res)
	if res.Failure == nil && (m.InstanceID == "" || res.Removed) {
		// Everything under the name is gone: what this actor knows is worth nothing.
		a.disposed = true
	}
}

// This file is the one teardown of a sandbox (egress-and-reap.md §1.9): drain and remove its
// proxy, remove the workload, remove its network last. It runs inside the sandbox's container
// actor, keyed by the workload's name, so a disposal never races that sandbox's acquire (which
// recreates the proxy) or any other call: they take turns in one mailbox. In a purge the
// proxy's drain (stop, log read, removal by the inspected ID, publication) and the workload's
// removal do not depend on each other — the window is complete either way, and only the
// workload's removal decides the answer — so they run at once; the network, which needs both
// gone, is removed last, after the reply (network_removal.go).

// dispose tears the sandbox down. It never freezes, never thaws and never execs. Only the
// workload's removal decides the answer of a purge: a proxy or network left behind is an
// infrastructure leak, logged (§1.9).
func (a *containerActor) dispose(ctx context.Context, m *disposeRequest) *disposeResponse {
	if m.InstanceID != "" {
		return a.disposeInstance(ctx, m)
	}
	// Purges sweep the derived names whatever the current egress config says, so a sandbox
	// made under an allowlist is reclaimed by a backend now configured closed.
	_, role, derived := docker.ParseName(a.name)
	derived = derived && role == docker.RoleWorkload
	a.endProcesses(ctx, "")
	var proxied chan struct{}
	if derived {
		proxied = make(chan struct{})
		go func() {
			defer close(proxied)
			proxy := docker.ProxyName(a.name)
			if err := a.b.teardownProxy(ctx, proxy, m.Caller, m.Trigger); err != nil {
				a.log.Warn("sweep proxy", zap.String("proxy", proxy), zap.Error(err))
			}
		}()
	}
	img := a.snapshotImageOf(a.info) // snapshot.go: read before the removal forgets it
	res := a.removeWorkload(ctx, a.name)
	if derived {
		<-proxied
		a.sweepNetwork(ctx)
	}
	a.releaseImage(ctx, img, res)
	return res
}

// disposeInstance is docker-backend §14.4 inside the actor: re-read the instance by its ID
// (the name may hold a successor by now), drain and remove the proxy that the instance's
// ownership labels claim, remove the instance by ID, then the network the instance recorded,
// after the reply. The proxy goes first here, not alongside the workload as in a purge: a
// proxy that cannot be removed fails the call and leaves the instance, so a retry by the same
// instance ID still finds it and sweeps the proxy (with the workload gone it would answer
// "gone already" and leave the proxy). A network left behind is logged.
func (a *containerActor) disposeInstance(ctx context.Context, m *disposeRequest) *disposeResponse {
	info, err := a.b.engine.Inspect(ctx, m.InstanceID)
	switch {
	case isNotFound(err):
		// Gone already: whatever holds its proxy or network names now is a successor's.
		return &disposeResponse{}
	case err != nil:
		return &disposeResponse{Failure: disposalFailure(m.InstanceID, err)}
	}
	a.endProcesses(ctx, info.ID)
	if err := a.removeOwnProxy(ctx, info, m); err != nil {
		return &disposeResponse{Failure: &sandbox.DisposalFailure{Code: disposalCode(err),
			Detail: fmt.Sprintf("the proxy of %s could not be removed, so the instance was left for the next disposal: %v", info.ID, err)}}
	}
	res := a.removeWorkload(ctx, info.ID)
	if res.Failure != nil {
		return res
	}
	if id, ok := info.Networks[docker.NetworkName(a.name)]; ok {
		a.removeRecordedNetwork(id)
	}
	a.releaseImage(ctx, a.snapshotImageOf(&info), res)
	return res
}

// removeOwnProxy drains and removes N-proxy by its inspected ID when it is the instance's: a
// proxy whose ownership labels differ from the instance's is not touched. nil when removed or
// absent.
func (a *containerActor) removeOwnProxy(ctx context.Context, info docker.ContainerInfo, m *disposeRequest) error {
	name := docker.ProxyName(a.name)
	p, err := a.b.engine.Inspect(ctx, name)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("inspect proxy %s: %w", name, err)
	case p.Labels[label.Role] != label.RoleProxy || !sameOwner(p.Labels, info.Labels):
		a.log.Warn("the proxy name is held by a container that is not this instance's proxy; left in place",
			zap.String("proxy", name), zap.String("container_id", p.ID))
		return nil
	}
	return a.b.drainRemove(ctx, p.ID, p.ID, m.Caller, m.Trigger)
}

// sameOwner reports whether two resources carry the same ownership labels.
func sameOwner(a, b map[string]string) bool {
	for _, k := range []string{label.Scope, label.Thread, label.Agent, label.Call, label.Kind} {
		va, oka := a[k]
		vb, okb := b[k]
		if oka != okb || va != vb {
			return false
		}
	}
	return true
}

// removeWorkload removes target (the name, or an instance ID) under the command bound.
func (a *containerActor) removeWorkload(ctx context.Context, target string) *disposeResponse {
	ctx, cancel := context.WithTimeout(ctx, a.b.commandTimeout())
	defer cancel()
	outcome, err := a.b.engine.Remove(ctx, target)
	a.forget()
	if err != nil {
		return &disposeResponse{Failure: disposalFailure(target, err)}
	}
	return &disposeResponse{Removed: outcome == docker.Removed}
}

// sweepNetwork is the last step of a purge: remove N-net by its inspected ID, never forced,
// after the reply; "not found" is a no-op, any other failure a logged leak.
func (a *containerActor) sweepNetwork(ctx context.Context) {
	nets := a.b.engine
	name := docker.NetworkName(a.name)
	if err := a.b.awaitNetworkRemoval(ctx, name); err != nil {
		a.log.Warn("sweep egress network", zap.String("network", name), zap.Error(err))
		return
	}
	n, err := nets.NetworkInspect(ctx, name)
	if isNotFound(err) {
		return
	}
	if err != nil {
		a.log.Warn("sweep egress network", zap.String("network", name), zap.Error(err))
		return
	}
	a.removeRecordedNetwork(n.ID)
}

// removeRecordedNetwork removes the network an instance recorded, by that ID (read back by
// name only when the engine did not report it), never forced, after the reply; "not found" is
// a no-op, any other failure a logged leak.
func (a *containerActor) removeRecordedNetwork(id string) {
	nets := a.b.engine
	name := docker.NetworkName(a.name)
	a.b.removeNetworkAfter(name, func(ctx context.Context) error {
		if id == "" {
			n, err := nets.NetworkInspect(ctx, name)
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			id = n.ID
		}
		if _, err := nets.NetworkRemove(ctx, id); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove network %s: %w", id, err)
		}
		return nil
	})
}

// disposalFailure classifies a failed removal for the protocol: the client could not run,
// the call outlived its budget (outcome unknown), or the engine answered and refused.
func disposalFailure(target string, err error) *sandbox.DisposalFailure {
	return &sandbox.DisposalFailure{Code: disposalCode(err), Detail: fmt.Sprintf("remove %s: %v", target, err)}
}

func disposalCode(err error) sandbox.DisposalCode {
	switch {
	case errors.Is(err, docker.ErrUnreachable):
		return sandbox.DisposalUnreachable
	case errors.Is(err, docker.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return sandbox.DisposalTimeout
	}
	return sandbox.DisposalRefused
}
