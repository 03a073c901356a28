package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Family sentinels. Every typed error below reports its family through an Is method, so
// callers use errors.Is for the class and errors.As for the detail.
var (
	// ErrNoBackend is the family of lookup failures: no backend, or an unknown one selected.
	ErrNoBackend = errors.New("sandbox: no backend")
	// ErrRefused is the family of policy refusals: the host or router will not run this.
	ErrRefused = errors.New("sandbox: refused")
	// ErrUnsupported is the family of functionality a backend does not offer.
	ErrUnsupported = errors.New("sandbox: unsupported")
	// ErrInvalid is the family of invalid arguments, confinement refusals included.
	ErrInvalid = errors.New("sandbox: invalid argument")
	// ErrOS is the family of OS-level failures: not found, not a directory, is a directory,
	// permission, timeouts.
	ErrOS = errors.New("sandbox: os error")
	// ErrOutput is the family of output-collection failures.
	ErrOutput = errors.New("sandbox: output error")
	// ErrTimeout is the family of expired caller timeouts. A timeout error means the caller's
	// timeout expired and nothing else; cancellation of a context is never one.
	ErrTimeout = errors.New("sandbox: timeout")
	// ErrGone is the family of calls on a sandbox that no longer exists: its instance was
	// discarded (an exec timeout, say), replaced, or removed behind the engine's back. Nothing
	// ran; acquire again.
	ErrGone = errors.New("sandbox: gone")
	// ErrProtocol marks a backend breaking the protocol (programming errors, not conditions).
	ErrProtocol = errors.New("sandbox: protocol violation")
	// ErrIsDirectory is the OS-level answer to reading a directory.
	ErrIsDirectory = errors.New("is a directory")
)

// isAny reports whether target is one of families; the Is methods below share it.
func isAny(target error, families ...error) bool {
	for _, f := range families {
		if target == f {
			return true
		}
	}
	return false
}

// NoBackendError says no backend can be looked up: none is configured, or the selected name
// is not registered.
type NoBackendError struct {
	Selected   string   // the requested name; "" when none is configured
	Registered []string // names that are registered
}

func (e *NoBackendError) Error() string {
	if e.Selected == "" {
		return "no sandbox backend is configured"
	}
	return fmt.Sprintf("sandbox backend %q is not registered (registered: %s)", e.Selected, namesOrNone(e.Registered))
}

// Is reports the lookup family.
func (e *NoBackendError) Is(target error) bool { return target == ErrNoBackend }

// BackendUnavailableError says a backend cannot reach what runs its sandboxes (for Docker,
// the daemon), or that it did not answer an acquire's step within the backend's own budget
// (busy): the call may be retried once it is back. It is of no family:
// the request was fine. Err is the backend's own error.
type BackendUnavailableError struct {
	Backend string
	Reason  string
	Err     error
}

func (e *BackendUnavailableError) Error() string {
	return fmt.Sprintf("backend %s is unavailable: %s", e.Backend, e.Reason)
}

// Unwrap returns the backend's error.
func (e *BackendUnavailableError) Unwrap() error { return e.Err }

// ImageMissingError says the image a sandbox needs is not present where the backend runs it,
// and the backend never fetches one. Hint says how to make it present. It is of no family:
// the request was fine, the host is not ready for it.
type ImageMissingError struct {
	Backend string
	Image   string
	Hint    string
}

func (e *ImageMissingError) Error() string {
	msg := fmt.Sprintf("image %s is not present for backend %s, which never pulls", e.Image, e.Backend)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// BackendNotPermittedError refuses a backend below the isolation floor, with an unknown rung,
// or with unreadable declarations. It is raised at router construction for a fixed selection:
// a misconfiguration must not start.
type BackendNotPermittedError struct {
	Backend  string
	Declared Isolation
	Floor    Isolation
	Reason   string // set instead of the rung comparison for unreadable declarations
}

func (e *BackendNotPermittedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("sandbox backend %q is not permitted: %s; it is refused rather than degraded", e.Backend, e.Reason)
	}
	rung := fmt.Sprintf("declares isolation %q", e.Declared)
	if e.Declared.Rank() < 0 {
		rung = fmt.Sprintf("declares %q, which is not a rung of the isolation ladder", e.Declared)
	}
	return fmt.Sprintf("sandbox backend %q %s, below the required floor %q (ladder, weakest first: %s); "+
		"it is refused rather than degraded: lower MinIsolation only if the host accepts that boundary",
		e.Backend, rung, e.Floor, ladderText())
}

// Is reports the refused family.
func (e *BackendNotPermittedError) Is(target error) bool { return target == ErrRefused }

// CapabilityNotSupportedError says a backend lacks a capability the workload requires, an
// egress method token, or (Docker) an image prerequisite checked at acquire.
type CapabilityNotSupportedError struct {
	Backend  string
	Missing  []Capability
	Kind     string
	Declared CapabilitySet
	Reason   string // optional detail, e.g. the missing guest command
}

func (e *CapabilityNotSupportedError) Error() string {
	declared := "nothing"
	if len(e.Declared) > 0 {
		declared = e.Declared.String()
	}
	msg := fmt.Sprintf("sandbox backend %q does not support %s required by the %q workload (it declares %s)",
		e.Backend, joinSorted(e.Missing), e.Kind, declared)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Is reports the unsupported family.
func (e *CapabilityNotSupportedError) Is(target error) bool { return target == ErrUnsupported }

// OSFamilyNotSupportedError says the backend's guests are not of the family the spec asks for.
type OSFamilyNotSupportedError struct {
	Backend   string
	Families  []OSFamily // what the backend declares
	Requested OSFamily
	Reason    string // optional, e.g. the daemon's answer changed on a cold acquire
}

func (e *OSFamilyNotSupportedError) Error() string {
	serves := "declares no guest whose shape it states"
	if len(e.Families) > 0 {
		serves = "serves " + joinSorted(e.Families) + " guests"
	}
	msg := fmt.Sprintf("sandbox backend %q %s; the workload requires a %s guest", e.Backend, serves, e.Requested)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// Is reports the unsupported family.
func (e *OSFamilyNotSupportedError) Is(target error) bool { return target == ErrUnsupported }

// CapabilityDeniedError says the host denies a capability the workload requires.
type CapabilityDeniedError struct {
	Denied []Capability
	Kind   string
}

func (e *CapabilityDeniedError) Error() string {
	return fmt.Sprintf("the %q workload requires %s, which this host will not grant", e.Kind, joinSorted(e.Denied))
}

// Is reports the refused family.
func (e *CapabilityDeniedError) Is(target error) bool { return target == ErrRefused }

// IdentityDeniedError says the host denies an identity the workload's host tools exercise.
type IdentityDeniedError struct {
	Identities []ToolIdentity
	Kind       string
}

func (e *IdentityDeniedError) Error() string {
	return fmt.Sprintf("the %q workload's host tools act as %s, which this host will not allow", e.Kind, joinSorted(e.Identities))
}

// Is reports the refused family.
func (e *IdentityDeniedError) Is(target error) bool { return target == ErrRefused }

// EgressNotEnforcedError says the backend cannot enforce the egress mode the workload runs in.
// The router never substitutes another mode.
type EgressNotEnforcedError struct {
	Backend  string
	Mode     Egress
	Kind     string
	Enforced []Egress
}

func (e *EgressNotEnforcedError) Error() string {
	enforced := "nothing"
	if len(e.Enforced) > 0 {
		enforced = joinSorted(e.Enforced)
	}
	return fmt.Sprintf("sandbox backend %q cannot enforce the %q egress the %q workload runs in (it enforces %s)",
		e.Backend, e.Mode, e.Kind, enforced)
}

// Is reports the refused family.
func (e *EgressNotEnforcedError) Is(target error) bool { return target == ErrRefused }

// TransferLimitsNotPermittedError says a workload's transfer caps exceed what the backend
// permits, or the backend's limits are mis-shaped. Caps are refused, never clamped.
type TransferLimitsNotPermittedError struct {
	Backend   string
	Direction string // "files_in" or "files_out"
	Asked     TransferLimits
	Permitted TransferLimits
	Reason    string // set for mis-shaped limits
}

func (e *TransferLimitsNotPermittedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("sandbox backend %q transfer limits are not permitted: %s", e.Backend, e.Reason)
	}
	return fmt.Sprintf("the workload asks %s caps of %s but sandbox backend %q permits %s; refused rather than clamped",
		e.Direction, e.Asked, e.Backend, e.Permitted)
}

// Is reports the refused family.
func (e *TransferLimitsNotPermittedError) Is(target error) bool { return target == ErrRefused }

// ResourcesNotPermittedError says a workload asks for more of a resource (memory, CPUs,
// processes) than the backend lets one sandbox have, or for a bound the backend cannot hold a
// sandbox to. Asks are refused, never clamped.
type ResourcesNotPermittedError struct {
	Backend   string
	Resource  string // "memory_bytes", "cpus" or "pids"; "" when the backend enforces none
	Asked     string
	Permitted string
}

func (e *ResourcesNotPermittedError) Error() string {
	if e.Resource == "" {
		return fmt.Sprintf("the workload asks for resource bounds but sandbox backend %q enforces none; refused rather than ignored", e.Backend)
	}
	return fmt.Sprintf("the workload asks for %s %s but sandbox backend %q permits at most %s; refused rather than clamped",
		e.Resource, e.Asked, e.Backend, e.Permitted)
}

// Is reports the refused family.
func (e *ResourcesNotPermittedError) Is(target error) bool { return target == ErrRefused }

// ScopeNotEnforcedError says the backend cannot keep sandboxes apart at the effective scope.
type ScopeNotEnforcedError struct {
	Backend string
	Scope   IsolationScope
}

func (e *ScopeNotEnforcedError) Error() string {
	return fmt.Sprintf("sandbox backend %q cannot enforce isolation scope %q", e.Backend, e.Scope)
}

// Is reports the refused family.
func (e *ScopeNotEnforcedError) Is(target error) bool { return target == ErrRefused }

// UncleanError refuses a key whose last disposal failed, until a disposal lands. It carries
// the disposal code only, never backend detail.
type UncleanError struct {
	Key  Key
	Code DisposalCode
}

func (e *UncleanError) Error() string {
	return fmt.Sprintf("sandbox %s is refused until a disposal lands: its last disposal failed (%s)", e.Key, e.Code)
}

// Is reports the refused family.
func (e *UncleanError) Is(target error) bool { return target == ErrRefused }

// AttachedIdentityNotPermittedError says an attached identity exceeds the host's bounds.
type AttachedIdentityNotPermittedError struct {
	Bound string // the bound violated
}

func (e *AttachedIdentityNotPermittedError) Error() string {
	return "attached identity is not permitted: " + e.Bound
}

// Is reports the refused family.
func (e *AttachedIdentityNotPermittedError) Is(target error) bool { return target == ErrRefused }

// NotConfinedError refuses a guest path that escapes its working directory, contains a
// backslash, passes through a symbolic link, names a link where a write would follow it, or
// names the working directory itself where that is not allowed.
type NotConfinedError struct {
	Path    string
	WorkDir string
	Reason  string
}

func (e *NotConfinedError) Error() string {
	return fmt.Sprintf("path %q is not confined to working directory %q: %s", e.Path, e.WorkDir, e.Reason)
}

// Is reports the invalid-argument family.
func (e *NotConfinedError) Is(target error) bool { return target == ErrInvalid }

// NotDirectoryError says a component above the target exists and is neither a directory nor
// a link: an ordinary ENOTDIR (the guest tripped over its own file; it did not escape).
type NotDirectoryError struct {
	Path string // the offending component
}

func (e *NotDirectoryError) Error() string { return fmt.Sprintf("%s: not a directory", e.Path) }

// Is reports the OS family, and matches syscall.ENOTDIR.
func (e *NotDirectoryError) Is(target error) bool { return isAny(target, ErrOS, syscall.ENOTDIR) }

// NotRegularError refuses to read an entry that is not a regular file (a link or "other").
type NotRegularError struct {
	Path string
	Kind EntryKind
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: not a regular file (%s); only regular files are read", e.Path, e.Kind)
}

// Is reports the OS family.
func (e *NotRegularError) Is(target error) bool { return target == ErrOS }

// PathError is an OS-level failure on a guest path. Err is fs.ErrNotExist, [ErrIsDirectory],
// fs.ErrPermission or another cause; errors.Is reaches both it and [ErrOS].
type PathError struct {
	Op   string
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PathError) Unwrap() error { return e.Err }

// Is reports the OS family.
func (e *PathError) Is(target error) bool { return target == ErrOS }

// TimeoutError says the caller's timeout expired, and nothing else. Discarded says the
// backend discarded the whole sandbox for it (protocol §4.3 allows that): every later call on
// the handle fails with [*GoneError].
type TimeoutError struct {
	Op        string
	Timeout   time.Duration
	Discarded bool
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("timed out after %s", e.Timeout)
	if e.Op != "" {
		msg = e.Op + " " + msg
	}
	if e.Discarded {
		msg += "; the sandbox was discarded with its processes, acquire it again"
	}
	return msg
}

// Is reports the timeout and OS families.
func (e *TimeoutError) Is(target error) bool { return isAny(target, ErrTimeout, ErrOS) }

// QueuedTimeoutError says RunCode's timeout expired before the program started: retry it
// unchanged.
type QueuedTimeoutError struct{ Timeout time.Duration }

func (e *QueuedTimeoutError) Error() string {
	return fmt.Sprintf("timed out after %s before the program started; retry unchanged", e.Timeout)
}

// Is reports the timeout family.
func (e *QueuedTimeoutError) Is(target error) bool { return isAny(target, ErrTimeout) }

// ProgramTimeoutError is a host-tool run's own bound expiring. Only Signal == absent means
// nothing was started; no value confirms termination: dispose to be sure.
type ProgramTimeoutError struct {
	Timeout     time.Duration
	Output      string // display text, at most 2000 characters
	OutputBytes []byte
	Note        string // why Output is empty when the output could not be read; "" when it was
	Signal      SignalOutcome
	Reach       SignalReach
}

func (e *ProgramTimeoutError) Error() string {
	signal := e.Signal
	if signal == "" {
		signal = SignalUnknown
	}
	if e.Note != "" {
		return fmt.Sprintf("program timed out after %s (signal %s to %s); %s", e.Timeout, signal, e.Reach, e.Note)
	}
	return fmt.Sprintf("program timed out after %s (signal %s to %s); output: %s", e.Timeout, signal, e.Reach, e.Output)
}

// Is reports the timeout and OS families.
func (e *ProgramTimeoutError) Is(target error) bool { return isAny(target, ErrTimeout, ErrOS) }

// ProcessNotStartedError says the backend's runtime could not start a program that an
// operation runs in the sandbox for its own work (the Docker backend's Remove runs the
// image's rm): nothing ran, and the operation failed. Message is the runtime's own words (for
// Docker, runc's "OCI runtime exec failed: …"). Exec never returns it: a command the runtime
// could not start is a result, with [ExecResult.NotStarted] set.
type ProcessNotStartedError struct {
	Program string // the command's first argument
	WorkDir string // the absolute working directory the exec asked for
	Cause   StartFailure
	Message string
}

func (e *ProcessNotStartedError) Error() string {
	return fmt.Sprintf("%q could not be started in %s (%s): %s; nothing ran", e.Program, e.WorkDir, e.Cause, e.Message)
}

// Is reports the OS family.
func (e *ProcessNotStartedError) Is(target error) bool { return target == ErrOS }

// ExecOutputLimitExceededError says a bounded exec's combined output passed its budget; no
// partial result is returned. Discarded says the backend discarded the whole sandbox for it
// (Docker does for its default cap on a plain Exec): later calls fail with [*GoneError].
type ExecOutputLimitExceededError struct {
	Budget    int64
	Discarded bool
}

func (e *ExecOutputLimitExceededError) Error() string {
	msg := fmt.Sprintf("command output exceeded the %d-byte budget", e.Budget)
	if e.Discarded {
		msg += "; the sandbox was discarded with its processes, acquire it again"
	}
	return msg
}

// Is reports the OS family.
func (e *ExecOutputLimitExceededError) Is(target error) bool { return target == ErrOS }

// GoneError says a call addressed a sandbox instance that no longer exists: the backend
// discarded it (an exec timeout), a later acquire replaced it, or it was removed behind the
// backend's back. Nothing ran; the backend has forgotten the instance. Acquire again.
type GoneError struct {
	InstanceID string
	Reason     string // how it went, when known
}

func (e *GoneError) Error() string {
	msg := fmt.Sprintf("sandbox instance %.12s no longer exists", e.InstanceID)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + "; nothing ran, acquire the sandbox again"
}

// Is reports the gone family.
func (e *GoneError) Is(target error) bool { return target == ErrGone }

// InvalidArgumentError is an argument the protocol refuses.
type InvalidArgumentError struct{ Reason string }

func (e *InvalidArgumentError) Error() string { return e.Reason }

// Is reports the invalid-argument family.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalid }

// UnsupportedError is a method the backend does not serve; callers that went through the
// router never see it, since the router refuses specs needing a missing capability.
type UnsupportedError struct {
	Backend string
	Op      string
	Reason  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("sandbox backend %q does not support %s: %s", e.Backend, e.Op, e.Reason)
}

// Is reports the unsupported family.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// ProtocolError is a backend breaking the protocol (an empty instance ID, say).
type ProtocolError struct {
	Backend string
	Reason  string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("sandbox backend %q broke the protocol: %s", e.Backend, e.Reason)
}

// Is reports the protocol family.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// OutputMissingError says a required declared output is absent.
type OutputMissingError struct {
	Kind string
	Path string
}

func (e *OutputMissingError) Error() string {
	return fmt.Sprintf("the %q workload did not produce its required output %q (declare it Required=false if its absence is a normal outcome)", e.Kind, e.Path)
}

// Is reports the output family.
func (e *OutputMissingError) Is(target error) bool { return target == ErrOutput }

// OutputNotConfinedError is a confinement refusal met while collecting a declared output.
type OutputNotConfinedError struct {
	Path string
	Err  error
}

func (e *OutputNotConfinedError) Error() string {
	return fmt.Sprintf("declared output %q is not confined: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *OutputNotConfinedError) Unwrap() error { return e.Err }

// Is reports the output family.
func (e *OutputNotConfinedError) Is(target error) bool { return target == ErrOutput }

// OutputNotRegularError says a declared output is not a regular file.
type OutputNotRegularError struct {
	Path string
	Kind EntryKind
}

func (e *OutputNotRegularError) Error() string {
	return fmt.Sprintf("declared output %q is a %s, not a regular file", e.Path, e.Kind)
}

// Is reports the output family.
func (e *OutputNotRegularError) Is(target error) bool { return target == ErrOutput }

// OutputSizeUnknownError says a declared output's size is unknown: it fails closed.
type OutputSizeUnknownError struct{ Path string }

func (e *OutputSizeUnknownError) Error() string {
	return fmt.Sprintf("declared output %q has no known size, so it is not read", e.Path)
}

// Is reports the output family.
func (e *OutputSizeUnknownError) Is(target error) bool { return target == ErrOutput }

// OutputUnreachableError is an OS-level failure met while collecting a declared output.
type OutputUnreachableError struct {
	Path string
	Err  error
}

func (e *OutputUnreachableError) Error() string {
	return fmt.Sprintf("declared output %q could not be reached: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *OutputUnreachableError) Unwrap() error { return e.Err }

// Is reports the output family.
func (e *OutputUnreachableError) Is(target error) bool { return target == ErrOutput }

// TransferCapExceededError refuses a transfer above a cap; nothing is truncated.
type TransferCapExceededError struct {
	Path   string // the file, "" when the cap is about the whole collection
	Cap    string // which cap: "max bytes", "per-file cap", "file count cap", "total cap"
	Limit  int64
	Actual int64 // the size, position or running total that broke it; -1 when unknown
}

func (e *TransferCapExceededError) Error() string {
	subject := "transfer"
	if e.Path != "" {
		subject = fmt.Sprintf("%q", e.Path)
	}
	if e.Actual >= 0 {
		return fmt.Sprintf("%s exceeds the %s of %d (reached %d); refused, not truncated", subject, e.Cap, e.Limit, e.Actual)
	}
	return fmt.Sprintf("%s exceeds the %s of %d; refused, not truncated", subject, e.Cap, e.Limit)
}

// Is reports the output family.
func (e *TransferCapExceededError) Is(target error) bool { return target == ErrOutput }

// LandingNotConfinedError says a sink destination would leave the sink's root. It names the
// artifact only, never host paths.
type LandingNotConfinedError struct{ Name string }

func (e *LandingNotConfinedError) Error() string {
	return fmt.Sprintf("artifact %q would land outside the sink's root", e.Name)
}

// Is reports the output family.
func (e *LandingNotConfinedError) Is(target error) bool { return target == ErrOutput }

// OutputSinkRequiredError says outputs are to land but no sink was given.
type OutputSinkRequiredError struct {
	Paths      []string
	AtCallTime bool // the outputs are named at call time
}

func (e *OutputSinkRequiredError) Error() string {
	what := strings.Join(e.Paths, ", ")
	if e.AtCallTime && what == "" {
		what = "names at call time"
	}
	return fmt.Sprintf("outputs to land (%s) need an output sink, and none was given", what)
}

// Is reports the output family.
func (e *OutputSinkRequiredError) Is(target error) bool { return target == ErrOutput }

// ArtifactNameInvalidError says an artifact name breaks the narrow name invariant.
type ArtifactNameInvalidError struct {
	Name string
	Rule string
}

func (e *ArtifactNameInvalidError) Error() string {
	return fmt.Sprintf("artifact name %q is invalid: %s", e.Name, e.Rule)
}

// Is reports the output family.
func (e *ArtifactNameInvalidError) Is(target error) bool { return target == ErrOutput }

// ArtifactNameCollisionError says two landing outputs would land as one file.
type ArtifactNameCollisionError struct {
	First, Second string
	Identical     bool // true: the same name; false: they differ only by case or Unicode form
}

func (e *ArtifactNameCollisionError) Error() string {
	how := "differ only by case or Unicode form"
	if e.Identical {
		how = "land as the identical name"
	}
	return fmt.Sprintf("outputs %q and %q collide: they %s", e.First, e.Second, how)
}

// Is reports the output family.
func (e *ArtifactNameCollisionError) Is(target error) bool { return target == ErrOutput }

// LandingExistsError says a sink destination already exists and replacing was not asked for.
type LandingExistsError struct{ Name string }

func (e *LandingExistsError) Error() string {
	return fmt.Sprintf("artifact %q already exists at the sink", e.Name)
}

// Is reports the output family.
func (e *LandingExistsError) Is(target error) bool { return target == ErrOutput }

// LandingNotTextError says a text-only sink was handed bytes that are not UTF-8 text.
type LandingNotTextError struct{ Name string }

func (e *LandingNotTextError) Error() string {
	return fmt.Sprintf("artifact %q is not UTF-8 text", e.Name)
}

// Is reports the output family.
func (e *LandingNotTextError) Is(target error) bool { return target == ErrOutput }

// HostToolNotDeclaredError refuses registering a host tool without a complete declaration.
type HostToolNotDeclaredError struct{ Tool string }

func (e *HostToolNotDeclaredError) Error() string {
	return fmt.Sprintf("host tool %q has no declaration; declare its source, sink and identity", e.Tool)
}

// Is reports the invalid-argument family.
func (e *HostToolNotDeclaredError) Is(target error) bool { return target == ErrInvalid }

// HostToolIdentityNotAllowedError refuses registering a host tool acting as an identity the
// registry does not allow.
type HostToolIdentityNotAllowedError struct {
	Tool     string
	Identity ToolIdentity
}

func (e *HostToolIdentityNotAllowedError) Error() string {
	return fmt.Sprintf("host tool %q acts as %s, which the registry does not allow; add it to AllowedIdentities or change the tool", e.Tool, e.Identity)
}

// Is reports the invalid-argument family.
func (e *HostToolIdentityNotAllowedError) Is(target error) bool { return target == ErrInvalid }

// ProbeFailure is one failed conformance probe.
type ProbeFailure struct {
	Name   string
	Reason string
	Why    string
}

// ConformanceFailure says one or more conformance probes failed.
type ConformanceFailure struct {
	Suite    string
	Total    int
	Failures []ProbeFailure
}

func (e *ConformanceFailure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d %s conformance probes failed:", len(e.Failures), e.Total, e.Suite)
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "\n- %s: %s", f.Name, f.Reason)
		if f.Why != "" {
			fmt.Fprintf(&b, " (%s)", f.Why)
		}
	}
	return b.String()
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
