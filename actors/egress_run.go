package actors

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/internal/execwire"
)

// An allowlisted cold acquire builds two things that do not depend on each other until
// hand-out: the proxy (create, start, seal probe, outbound leg) and the workload (create,
// facts, storage base). The proxy is built on a goroutine of the acquire while the actor
// prepares the workload. When the proxy image carries the workload gate, the workload's first
// process is the gate (cmd/gate): the workload starts while the proxy starts
// and probes, and the gate runs the image's own command only once the proxy, sealed, hands it
// the release token over the internal network; without a gate the workload's start waits
// for the verdict. Either way no process of the image runs on a network before its proof,
// and hand-out waits for the whole proxy and the §1.7 checks. The goroutine never outlives
// the acquire: every path out of it joins the run first.

// egressRun is what one acquire is building for an allowlisted sandbox.
type egressRun struct {
	nets      docker.Networks
	networkID string
	fresh     bool // the network was created by this acquire
	prove     bool // the proxy proves the network's seal before its outbound leg
	// addrs are the proxy's and the workload's fixed addresses on the network (invalid when
	// the subnet gives none): the seal probe skips the workload's, since it may already be up
	// there, gated, and the gate dials the proxy's for its release.
	addrs egressAddrs
	// token is the gate's release, drawn per acquire when the network is to be proved and
	// both addresses are fixed ("" otherwise: the workload is not gated).
	token string

	gateOnce  sync.Once
	gateReady chan struct{} // closed once it is known whether the workload is gated
	gate      []byte        // the gate binary, read after gateReady; nil: not gated
	workload  *workloadGate // the gate of the workload this acquire created, nil when not gated

	sealOnce sync.Once
	sealed   chan struct{} // closed once the seal verdict is in (at once when prove is false)
	sealErr  error         // read after sealed

	done    chan struct{} // closed when the proxy is built or its build failed
	proxyID string        // read after done
	ca      []byte        // the proxy's CA certificate (DER) when it inspects, read after done
	err     error         // read after done
	joined  bool
}

// egressLaunch is what an acquire knows about its network when it launches the proxy's build.
type egressLaunch struct {
	networkID string
	addrs     egressAddrs
	fresh     bool // this acquire created the network
	prove     bool // this actor has not proved the network's seal yet
	// creates says whether this acquire creates the workload (none exists): only then is it
	// gated, and only then does the proxy take its fixed address — a workload an older engine
	// left on the network may hold it.
	creates bool
}

func newEgressRun(nets docker.Networks, l egressLaunch) (*egressRun, error) {
	addrs, prove := l.addrs, l.prove
	if !l.creates {
		addrs.proxy = netip.Addr{}
	}
	r := &egressRun{nets: nets, networkID: l.networkID, addrs: addrs, fresh: l.fresh, prove: prove,
		sealed: make(chan struct{}), done: make(chan struct{}), gateReady: make(chan struct{})}
	if !prove {
		r.markSealed(nil) // proved by an earlier acquire of this actor
		r.offerGate(nil)  // nothing to wait for: the workload starts as it is
		return r, nil
	}
	if addrs.proxy.IsValid() && addrs.workload.IsValid() {
		var token [16]byte
		if _, err := rand.Read(token[:]); err != nil {
			return nil, fmt.Errorf("draw the workload gate's release token: %w", err)
		}
		r.token = hex.EncodeToString(token[:])
	}
	return r, nil
}

// gateProxy is where the gate dials for its release: the proxy's fixed address.
func (r *egressRun) gateProxy() string {
	return netip.AddrPortFrom(r.addrs.proxy, egresslog.GatePort).String()
}

// offerGate records whether the workload is gated (gate is the binary, nil for not); only the
// first call counts.
func (r *egressRun) offerGate(gate []byte) {
	r.gateOnce.Do(func() { r.gate = gate; close(r.gateReady) })
}

// gateFor waits until the proxy's build says whether the workload is gated and returns the
// gate binary, nil for not.
func (r *egressRun) gateFor(ctx context.Context) ([]byte, error) {
	select {
	case <-r.gateReady:
		return r.gate, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// markSealed records the seal verdict; only the first call counts.
func (r *egressRun) markSealed(err error) {
	r.sealOnce.Do(func() { r.sealErr = err; close(r.sealed) })
}

// build runs on its own goroutine: the proxy of this acquire, marking the seal verdict as
// soon as it is in.
func (r *egressRun) build(fn func(sealed func()) (string, error)) {
	defer close(r.done)
	defer r.offerGate(nil) // a build that failed before reading the gate: not gated
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

// gatePath is where the workload gate lives in the proxy image (images.GateBinary), read once
// per backend, and where it is copied into each gated workload.
const gatePath = "/maf-sandbox-gate"

// gateProtocol is the gate's usage line (cmd/gate), looked for in the binary:
// a gate that does not carry it predates the release over the network and is not used.
const gateProtocol = "usage: maf-sandbox-gate PROXY TOKEN COMMAND"

// maxGateBytes bounds the gate binary's read from the proxy image.
const maxGateBytes = 16 << 20

// workloadGate is the gate of the workload one acquire created.
type workloadGate struct {
	binary []byte
	execd  bool // the gate releases the exec channel's supervisor, copied in beside it
}

// workloadOpts are the create options an allowlisted acquire adds to its workload, and
// whether its image is present: the fixed address, and — when the proxy image carries the
// gate and the network is still to be proved — the gate as entrypoint, with its release (the
// proxy's address and the token, which also names the file a restart is released by) and
// the image's own entrypoint and command as its arguments. The token holds 128 random bits
// drawn per acquire, so no image can ship it.
func (a *containerActor) workloadOpts(ctx context.Context, r *egressRun, imageRef string, present func() (bool, error)) ([]docker.CreateOpt, bool, error) {
	if r == nil {
		ok, err := present()
		return nil, ok, err
	}
	r.workload = nil
	var opts []docker.CreateOpt
	if r.addrs.workload.IsValid() {
		opts = append(opts, docker.WithIPv4(r.addrs.workload))
	}
	if !r.prove || r.token == "" {
		ok, err := present()
		return opts, ok, err
	}
	// The image's entrypoint is read first; whether the proxy image has a gate is known from
	// the backend's first proxy on, and only that first acquire waits for its proxy's create.
	ep, ok, err := a.b.engine.ImageEntrypoint(ctx, imageRef)
	if err != nil || !ok {
		return nil, ok, err
	}
	gate, known := a.b.knownGate()
	if !known {
		if gate, err = r.gateFor(ctx); err != nil {
			return nil, false, err
		}
	}
	if gate == nil {
		return opts, true, nil
	}
	// An image without an entrypoint has the gate release the exec channel's supervisor
	// (exec_channel.go) where a closed sandbox would run it; any other runs as it always did.
	execd := a.b.execd != nil && len(ep) == 0
	if execd {
		ep = []string{execwire.Binary}
	}
	cmd := append(append([]string{r.gateProxy(), r.token}, ep...), docker.KeepAlive()...)
	r.workload = &workloadGate{binary: gate, execd: execd}
	return append(opts, docker.WithEntrypoint(gatePath), docker.WithCmd(cmd...)), true, nil
}

// gatedRelease is the release file of a workload whose first process is the gate (its path,
// "." and the token, the gate's second argument), "" for any other.
func gatedRelease(info *docker.ContainerInfo) string {
	if info == nil || !slices.Equal(info.Entrypoint, []string{gatePath}) || len(info.Cmd) < 3 ||
		strings.ContainsAny(info.Cmd[1], "/.") || info.Cmd[1] == "" {
		return ""
	}
	return gatePath + "." + info.Cmd[1]
}

// startGated copies the gate into a workload this acquire created and starts it — the gate is
// then its only process, waiting for the proxy's release — and waits for the seal verdict. A
// failure at any step, the proof's included, removes the workload: nothing of it has run.
func (a *containerActor) startGated(ctx context.Context, id string, g *workloadGate) error {
	fail := func(err error) error { a.removeContainer(id); return err }
	entries := []docker.TarEntry{docker.FileEntry(gatePath, g.binary, 0o755, 0, 0)}
	if g.execd {
		entries = append(entries, a.supervisorEntries(id)...)
	}
	gate, err := docker.BuildTar(entries...)
	if err != nil {
		return fail(err)
	}
	if err := a.b.engine.CopyIn(ctx, id, gate); err != nil {
		return fail(fmt.Errorf("copy the gate into %s: %w", a.name, err))
	}
	if err := a.b.engine.Start(ctx, id); err != nil {
		return fail(fmt.Errorf("docker could not start container %s: %w", a.name, err))
	}
	a.info = nil
	if err := a.beforeStart(ctx); err != nil { // the network's seal
		return fail(err)
	}
	return nil
}

// releaseForRestart writes the release file into a stopped gated workload before it is
// started again: its network was proved when it was created, and the proxy that released it
// then may be gone. No-op for a workload that is not gated.
func (a *containerActor) releaseForRestart(ctx context.Context, info *docker.ContainerInfo) error {
	release := gatedRelease(info)
	if release == "" {
		return nil
	}
	tar, err := docker.BuildTar(docker.FileEntry(release, nil, 0o444, 0, 0))
	if err == nil {
		err = a.b.engine.CopyIn(ctx, info.ID, tar)
	}
	if err != nil {
		return fmt.Errorf("release the gate of %s for its restart: %w", a.name, err)
	}
	return nil
}

// gatedWorkload is the gate of the workload this acquire created, nil when not gated.
func (a *containerActor) gatedWorkload() *workloadGate {
	if a.egressBuild == nil {
		return nil
	}
	return a.egressBuild.workload
}

// egressAddrs are the fixed addresses of a sandbox's proxy and workload on its network.
type egressAddrs struct {
	proxy, workload netip.Addr
}

// egressAddresses are the fixed addresses on an egress network: the workload takes the last
// host of its IPv4 subnet and the proxy the one after the gateway (the subnet's first host).
// Both invalid when the network has no IPv4 subnet with room for gateway, proxy and workload.
func egressAddresses(n docker.NetworkInfo) egressAddrs {
	for _, c := range n.IPAM {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() || p.Bits() > 29 {
			continue
		}
		b := p.Masked().Addr().As4()
		base := binary.BigEndian.Uint32(b[:])
		at := func(v uint32) netip.Addr {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], v)
			return netip.AddrFrom4(a)
		}
		last := base | (1<<(32-p.Bits()) - 1) // the broadcast address
		return egressAddrs{proxy: at(base + 2), workload: at(last - 1)}
	}
	return egressAddrs{}
}
