package actors

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// ErrEngineStopped means the backend was closed, or its actor lost a reply: the call's
// outcome is unknown. It is in the sandbox.ErrOS family.
var ErrEngineStopped error = engineStopped{}

type engineStopped struct{}

func (engineStopped) Error() string        { return "sandbox engine stopped" }
func (engineStopped) Is(target error) bool { return target == sandbox.ErrOS }

// ErrEgressTopologyUnavailable: the engine cannot build a bridge with no host address, so an
// allowlist with hosts cannot be served on it (egress-and-reap.md §1.4).
var ErrEgressTopologyUnavailable = errors.New("egress topology unavailable")

// EgressTopologyError is a topology refusal: the daemon's answer or the check that failed,
// what became of the network, and [floorMessage]. It matches [ErrEgressTopologyUnavailable]
// and sandbox.ErrUnsupported.
type EgressTopologyError struct {
	Network string
	Reason  string // the daemon's text or the failed check
	Cleanup string // what became of the network we created, "" when none was created
}

func (e *EgressTopologyError) Error() string {
	s := fmt.Sprintf("egress network %s: %s", e.Network, e.Reason)
	if e.Cleanup != "" {
		s += " (" + e.Cleanup + ")"
	}
	return s + ": " + floorMessage
}

// Is reports [ErrEgressTopologyUnavailable] and the unsupported family.
func (e *EgressTopologyError) Is(target error) bool {
	return target == ErrEgressTopologyUnavailable || target == sandbox.ErrUnsupported
}

// ErrEgressSealBroken: the seal probe reached the host from a new internal network; the
// network was discarded and the acquire refused.
var ErrEgressSealBroken = errors.New("egress network seal broken")

// EgressSealError is a failed seal proof: what answered, and what became of the network.
// It matches [ErrEgressSealBroken] and [ErrEgressTopologyUnavailable].
type EgressSealError struct {
	Network string
	Breach  string // what answered the probe, or why the probe gave no verdict
	Cleanup string
}

func (e *EgressSealError) Error() string {
	return fmt.Sprintf("egress network %s is not sealed from the host: %s (%s); refusing the allowlisted sandbox: "+
		"check the host's addresses and routes on Docker's bridges", e.Network, e.Breach, e.Cleanup)
}

// Is reports [ErrEgressSealBroken] and [ErrEgressTopologyUnavailable].
func (e *EgressSealError) Is(target error) bool {
	return target == ErrEgressSealBroken || target == ErrEgressTopologyUnavailable
}

// EgressSubnetsExhaustedError: every candidate subnet of the pool was taken.
type EgressSubnetsExhaustedError struct {
	Network string
	Pool    netip.Prefix
	Tried   int
}

func (e *EgressSubnetsExhaustedError) Error() string {
	return fmt.Sprintf("egress network %s: the daemon refused all %d candidate subnets of the egress pool %s as overlapping; "+
		"dispose allowlisted sandboxes, reap leftovers, or give the engine a wider pool (docker.Config.EgressSubnetPool, engine serve --egress-subnet-pool)",
		e.Network, e.Tried, e.Pool)
}

// Is reports [ErrEgressTopologyUnavailable]: no network can be built for the sandbox now.
func (e *EgressSubnetsExhaustedError) Is(target error) bool {
	return target == ErrEgressTopologyUnavailable
}

// errExecTimedOut is the cause of an exec's context ending at its own timeout, not because
// its caller stopped waiting.
var errExecTimedOut = errors.New("exec timed out")

// ErrExecChannelUnproven is a channel that could not be proved before the command was sent:
// no supervisor, a socket that is not its own, a wrong protocol. The exec takes docker exec.
var ErrExecChannelUnproven = errors.New("exec channel not proven")

// ExecChannelError is a channel that failed after the command was sent: the program may have
// run, so neither a result nor a second attempt is given; the caller gets this error.
type ExecChannelError struct {
	Container string
	Err       error
}

func (e *ExecChannelError) Error() string {
	return fmt.Sprintf("the exec channel of %s failed after the command was sent, its outcome is unknown: %v", e.Container, e.Err)
}

func (e *ExecChannelError) Unwrap() error { return e.Err }

// FreezeError is a file call refused because the freezer could not freeze a busy guest after
// its retries. The guest was left running (each failed attempt is followed by an unpause);
// the call did nothing and may be tried again. It wraps [docker.ErrFreezeFailed].
type FreezeError struct {
	Container string
	Attempts  int
	Err       error
}

func (e *FreezeError) Error() string {
	return fmt.Sprintf("docker could not freeze %s for a file call in %d attempts (the freezer gave up on a busy guest; it was left running): %v",
		e.Container, e.Attempts, e.Err)
}

func (e *FreezeError) Unwrap() error { return e.Err }

// ErrReapInProgress is returned by [Backend.Reap] while another Reap of the same backend is
// running: two sweeps of one engine would race each other's revalidation.
var ErrReapInProgress = errors.New("actors: a reap of this engine is already in progress")

// unavailable types an error that says the daemon cannot be reached (or its client cannot
// start) as a [*sandbox.BackendUnavailableError] wrapping it; any other error, nil included,
// passes unchanged.
func unavailable(err error) error {
	if err == nil || !errors.Is(err, docker.ErrUnreachable) {
		return err
	}
	reason := "the Docker daemon cannot be reached"
	if errors.Is(err, docker.ErrClientNotFound) {
		reason = "the docker client binary cannot be found"
	}
	return &sandbox.BackendUnavailableError{Backend: BackendName, Reason: reason, Err: err}
}

// busy types an engine call of an acquire that outlived its own budget ([docker.ErrTimeout]:
// the daemon did not answer within Config.CommandTimeout, a start under a burst, say) as a
// [*sandbox.BackendUnavailableError] wrapping it, so errors.Is(err, docker.ErrTimeout) still
// holds and the NATS client is told it may retry (engine_unavailable). An acquire can be
// repeated: it adopts what the timed-out call may have left. An error that already says what
// it is (a sandbox family, or unavailable already) passes; the rest goes through unavailable.
func busy(err error) error {
	var ua *sandbox.BackendUnavailableError
	if err == nil || !errors.Is(err, docker.ErrTimeout) || errors.As(err, &ua) || sandboxFamily(err) {
		return unavailable(err)
	}
	return &sandbox.BackendUnavailableError{Backend: BackendName, Err: err,
		Reason: "the Docker daemon did not answer within the engine's command timeout (busy), retry: " + err.Error()}
}

// sandboxFamily reports whether err says a family of package sandbox.
func sandboxFamily(err error) bool {
	for _, f := range []error{sandbox.ErrNoBackend, sandbox.ErrRefused, sandbox.ErrUnsupported, sandbox.ErrInvalid,
		sandbox.ErrOS, sandbox.ErrOutput, sandbox.ErrTimeout, sandbox.ErrGone, sandbox.ErrProtocol} {
		if errors.Is(err, f) {
			return true
		}
	}
	return false
}
