package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// Observer receives every act of the engine, reported where it happens, synchronously on the
// goroutine that did it: the [Router] reports acquires, disposals and purges; a backend the
// router hands the observer ([Reporting]) reports what it does itself — commands, file
// crossings, resets, egress windows, sweeps; a host-tools run reports its program and each
// tool call; an API in front of the router reports its own acts (its states, placement, the
// calls it refused). What only the caller of an act knows — its request ID, trace, account,
// API handle — rides in the context ([WithCall], [CallOf]).
//
// An observer must not block: hand the act to a queue. Embed [NopObserver] so that a new act
// never breaks an implementation; a new act is one more method here and there. A panicking
// observer is contained (the router guards what it delivers and hands out) and never alters
// a call. Without an observer no act is built.
type Observer interface {
	SandboxAcquired(ctx context.Context, a SandboxAcquired)
	SandboxDisposed(ctx context.Context, a SandboxDisposed)
	ScopeDisposed(ctx context.Context, a ScopeDisposed)
	SandboxReset(ctx context.Context, a SandboxReset)
	ExecFinished(ctx context.Context, a ExecFinished)
	FileCrossed(ctx context.Context, a FileCrossed)
	FingerprintTaken(ctx context.Context, a FingerprintTaken)
	// EgressPending is a window drained from its enforcer, reported before the enforcer's
	// removal: a record for an observer that must not lose the window should the engine die
	// before the removal's outcome is known, not yet an event. EgressObserved follows once the
	// removal succeeded or found the enforcer absent, and only then.
	EgressPending(ctx context.Context, w EgressWindow)
	EgressObserved(ctx context.Context, w EgressWindow)
	ReapCompleted(ctx context.Context, a ReapCompleted)
	HostToolCalled(ctx context.Context, a HostToolCalled)
	PlacementChanged(ctx context.Context, a PlacementChanged)
	EngineStateChanged(ctx context.Context, a EngineStateChanged)
	CallRefused(ctx context.Context, a CallRefused)
	// ProcessStarted and ProcessExited are reported by a backend that runs processes, from
	// the goroutine that saw the start or the end.
	ProcessStarted(ctx context.Context, a ProcessStarted)
	ProcessExited(ctx context.Context, a ProcessExited)
	// A sandbox's lifecycle (sleep.go, snapshot.go): the backend's own acts.
	SandboxPaused(ctx context.Context, a SandboxPaused)
	SandboxWoken(ctx context.Context, a SandboxWoken)
	SandboxStopped(ctx context.Context, a SandboxStopped)
	SnapshotTaken(ctx context.Context, a SnapshotTaken)
	SandboxRestored(ctx context.Context, a SandboxRestored)
	SandboxForked(ctx context.Context, a SandboxForked)
}

// Reporting is implemented by a backend that reports the acts it does itself: the commands,
// file crossings and resets on its sandboxes, its egress windows and its sweeps. ReportTo
// installs obs and returns the observer it replaced; nil switches reporting off, and a
// backend reporting to nobody reads no egress enforcer. It either swaps or fails having
// changed nothing. The router hands every such backend its observer (or nil) once, at the
// end of its construction: a backend reports to the last router built over it.
type Reporting interface {
	ReportTo(obs Observer) (previous Observer, err error)
}

// Act is what every act says of itself.
type Act struct {
	Key        Key    // the sandbox it concerns; zero for an act of the engine itself
	Kind       string // the sandbox's kind, when known
	Backend    string // the backend that did it
	InstanceID string // the instance it concerns, when known
	Took       time.Duration
	Err        error // why it failed or was refused; nil when it was done
}

// SandboxAcquired is one acquire, served or refused (Err).
type SandboxAcquired struct {
	Act
	// Outcome says how the instance was got: OutcomeCreated, OutcomeReused,
	// OutcomeRestarted, OutcomeAdopted, or, for an instance the router did not trust,
	// OutcomeReset or OutcomeReplaced (Untrusted names it). "" when refused.
	Outcome   string
	Image     string // as the spec names it
	ImageID   string // the image the instance runs, as the daemon reports it; "" when unknown
	Egress    Egress
	Untrusted string
}

// SandboxDisposed is one disposal of a key: of every kind, or of Kind, or of InstanceID.
type SandboxDisposed struct {
	Act
	Undisposed *DisposalFailure // what may remain; nil when nothing was reported
}

// ScopeDisposed is one purge of a conversation: Key carries its scope and thread.
type ScopeDisposed struct {
	Act
	Purge ScopePurge
}

// SandboxReset is one reset of a sandbox: InstanceID is the new instance, Previous the one
// it replaced, Reason who asked ([ActReason]).
type SandboxReset struct {
	Act
	Previous string
	Reason   string
}

// Forms of a command, as [ExecFinished.Form] names them.
const (
	FormArgv    = "argv"
	FormShell   = "shell"
	FormCode    = "code"    // RunCode
	FormProgram = "program" // a host-tools program
)

// ExecFinished is one command, ended or refused (Err: a *TimeoutError, an
// *ExecOutputLimitExceededError, or any refusal). The command's text is never carried (it
// may hold secrets): [CommandDigest] gives Argv0 and CommandSHA256.
type ExecFinished struct {
	Act
	Form          string // FormArgv, FormShell, FormCode or FormProgram
	Argv0         string // the program, at most 120 bytes; "" but for argv
	CommandSHA256 string
	ExitCode      int // meaningful only when Err is nil
	StdoutBytes   int64
	StderrBytes   int64
	NotStarted    StartFailure // why the runtime could not start it; "" when it ran
}

// CommandDigest returns what an [ExecFinished] carries of a command in place of its text: its
// form, argv[0] (at most 120 bytes, argv only) and the hex SHA-256 of the argv's JSON array,
// or of text (the shell line, the code or the program's source) when argv is empty.
func CommandDigest(argv []string, text, form string) (argv0, sum string) {
	b := []byte(text)
	if len(argv) > 0 {
		b, _ = json.Marshal(argv) // a []string always encodes
		argv0 = Clip(argv[0], 120)
	}
	s := sha256.Sum256(b)
	return argv0, hex.EncodeToString(s[:])
}

// Directions of a file crossing.
const (
	DirectionIn  = "in"  // into the sandbox: a write
	DirectionOut = "out" // out of the sandbox: a read
)

// FileCrossed is one file crossing into or out of a sandbox, or its refusal (Err; a
// confinement refusal is a *NotConfinedError). Size and SHA256 are of what crossed, none when
// refused.
type FileCrossed struct {
	Act
	Direction string // DirectionIn or DirectionOut
	Path      string // as asked: guest-chosen text
	Size      int64
	SHA256    string
}

// FingerprintTaken is one fingerprint of a sandbox (§ fingerprint): Phase is baseline or
// final, Verdict the final comparison's (clean, changed) or skipped.
type FingerprintTaken struct {
	Act
	Phase, Verdict string
}

// ReapCompleted is one age-based sweep that ran (a dry run included; one refused for its
// argument or cancelled is none).
type ReapCompleted struct {
	Act
	Result ReapResult
}

// HostToolCalled is one call of a host-tools program, delivered or refused. A refusal is
// carried by its code only (the sentence may quote guest text).
type HostToolCalled struct {
	Act
	RunDir  string
	Tool    string // the name as the guest sent it, at most 120 bytes; "" when not a string
	Call    int    // the run's call number, refusals included
	Refusal string // the refusal code ("cap", "unknown", …); "" when a value was delivered
	Bytes   int    // delivered bytes, framing included
}

// Placement changes, as [PlacementChanged.Change] names them.
const (
	PlacementClaimed   = "claimed"    // this engine claimed a sandbox no engine held
	PlacementTakenOver = "taken_over" // … one whose owner's lease had lapsed (Detail names it)
	PlacementLost      = "lost"       // a renewal found the sandbox another engine's
	PlacementLameDuck  = "lame_duck"  // the engine takes no new sandboxes (no key)
)

// PlacementChanged is a change of where a sandbox is served, or of whether the engine takes
// new ones.
type PlacementChanged struct {
	Act
	Change, Detail string
}

// ProcessStarted is a process a backend started (not a start repeated under its ID).
type ProcessStarted struct {
	Act
	Process Process
}

// ProcessExited is a process's end, reported once per process: Process.Exit says how it
// ended (its reason, code and signal).
type ProcessExited struct {
	Act
	Process Process
}

// Engine states, as [EngineStateChanged.State] names them.
const (
	EngineStarted           = "started"
	EngineDraining          = "draining"
	EngineStopped           = "stopped"
	EngineDaemonUnreachable = "daemon_unreachable" // Err: what the probe met
	EngineDaemonBack        = "daemon_back"
)

// EngineStateChanged is a state of the engine itself.
type EngineStateChanged struct {
	Act
	State string
}

// CallRefused is a call an API in front of the engine refused before it reached the engine
// (its tenancy, say), with the operation it named. Err is the refusal. The sandbox it named
// is not carried: the call had no right to it.
type CallRefused struct {
	Act
	Op string
}

// Outcomes of an act, as observers name them: how a command ended, or that an act was
// refused.
const (
	OutcomeOK          = "ok"
	OutcomeRefused     = "refused"
	OutcomeTimeout     = "timeout"      // a command's timeout expired
	OutcomeOutputLimit = "output_limit" // a command's output passed its cap
)

// ActOutcome names how an act whose error is err ended: ok, timeout, output_limit or refused.
func ActOutcome(err error) string {
	var te *TimeoutError
	var oe *ExecOutputLimitExceededError
	switch {
	case err == nil:
		return OutcomeOK
	case errors.As(err, &te):
		return OutcomeTimeout
	case errors.As(err, &oe):
		return OutcomeOutputLimit
	}
	return OutcomeRefused
}

// Clip cuts s to at most n bytes on a rune boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
