package actors

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
)

// An allowlisted cold acquire builds two things that do not depend on each other until
// hand-out: the proxy (create, start, seal probe, outbound leg) and the workload (create,
// facts, storage base). The proxy is built on a goroutine of the acquire while the actor
// prepares the workload; the workload's start — its first process — waits for the seal
// verdict, and hand-out waits for the whole proxy and the §1.7 checks. The goroutine never
// outlives the acquire: every path out of it joins the run first.

// egressRun is what one acquire is building for an allowlisted sandbox.
type egressRun struct {
	nets      docker.Networks
	networkID string
	fresh     bool // the network was created by this acquire
	prove     bool // the proxy proves the network's seal before its outbound leg

	sealOnce sync.Once
	sealed   chan struct{} // closed once the seal verdict is in (at once when prove is false)
	sealErr  error         // read after sealed

	done    chan struct{} // closed when the proxy is built or its build failed
	proxyID string        // read after done
	err     error         // read after done
	joined  bool
}

func newEgressRun(nets docker.Networks, networkID string, fresh, prove bool) *egressRun {
	r := &egressRun{nets: nets, networkID: networkID, fresh: fresh, prove: prove,
		sealed: make(chan struct{}), done: make(chan struct{})}
	if !prove {
		r.markSealed(nil) // proved by an earlier acquire of this actor
	}
	return r
}

// markSealed records the seal verdict; only the first call counts.
func (r *egressRun) markSealed(err error) {
	r.sealOnce.Do(func() { r.sealErr = err; close(r.sealed) })
}

// build runs on its own goroutine: the proxy of this acquire, marking the seal verdict as
// soon as it is in.
func (r *egressRun) build(fn func(sealed func()) (string, error)) {
	defer close(r.done)
	r.proxyID, r.err = fn(func() { r.markSealed(nil) })
	if r.err != nil {
		r.markSealed(r.err)
	}
}

// errSealPending: the proxy's build failed before a seal verdict; the workload stays unstarted.
var errSealPending = errors.New("the egress network's seal was not proved")

// beforeStart blocks until this acquire's network is proved sealed (or needed no proof): no
// workload process runs on a network before its proof. nil when no allowlist is being built.
func (a *containerActor) beforeStart(ctx context.Context) error {
	r := a.egressBuild
	if r == nil {
		return nil
	}
	select {
	case <-r.sealed:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.sealErr != nil {
		return errors.Join(errSealPending, r.sealErr)
	}
	return nil
}

// joinEgress waits for the proxy's build and settles the acquire's outcome: the proxy's
// failure is the cause and wins over werr, the workload side's failure (which may be only
// its consequence: an unstarted workload). A network whose seal broke is discarded with
// whatever it holds; a network this acquire created for a proxy that failed otherwise is
// removed with the workload this acquire may have created on it. Idempotent.
func (a *containerActor) joinEgress(r *egressRun, werr error) error {
	if r == nil {
		return werr
	}
	<-r.done
	if r.joined {
		if werr != nil {
			return werr
		}
		return r.err
	}
	r.joined = true
	if a.egressBuild == r {
		a.egressBuild = nil
	}
	if r.err == nil {
		if r.prove {
			a.provedNetwork = r.networkID
		}
		return werr
	}
	if werr != nil && !errors.Is(werr, errSealPending) {
		a.log.Info("workload side of a failed allowlisted acquire", zap.Error(werr))
	}
	var seal *EgressSealError
	switch {
	case errors.As(r.err, &seal):
		seal.Cleanup = a.discardUnsealed(r.nets, r.networkID)
	case r.fresh:
		a.removeContainer(a.name) // on the network: it would hold it against the removal
		a.removeNetwork(r.nets, r.networkID)
	}
	return r.err
}
