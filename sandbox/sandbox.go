package sandbox

import (
	"context"
	"time"
)

// Command is what Exec runs: exactly one of Argv (non-empty, delivered element by element,
// never re-split) and Shell (a command line evaluated by sh -c in the guest).
type Command struct {
	Argv  []string
	Shell string
}

// Argv builds an argv command.
func Argv(args ...string) Command { return Command{Argv: args} }

// Shell builds a shell-string command.
func Shell(line string) Command { return Command{Shell: line} }

// Validate refuses a command that sets both forms or neither.
func (c Command) Validate() error {
	switch {
	case len(c.Argv) > 0 && c.Shell != "":
		return &InvalidArgumentError{Reason: "a command is either argv or a shell string, not both"}
	case len(c.Argv) == 0 && c.Shell == "":
		return &InvalidArgumentError{Reason: "a command needs a non-empty argv or a shell string"}
	}
	return nil
}

// Sandbox is one running sandbox. Every method exists on every implementation; one the
// backend does not serve fails with an error in the [ErrUnsupported] family naming the
// backend and why. wd travels with every call because a sandbox is never told its spec's
// work_dir; a relative wd resolves beneath the storage base, "." naming the base.
//
// A cancelled ctx is the caller abandoning the call and yields the wrapped ctx.Err(); only an
// expired timeout argument yields a [*TimeoutError].
type Sandbox interface {
	// InstanceID is the physical identity (the engine's container ID), never a derived name.
	InstanceID() string
	// WriteFile writes content byte-exact, replacing any previous file, creating missing
	// parents. Escapes, backslashes, the working directory itself, a link among the ancestors
	// and a link at the leaf fail with [*NotConfinedError]; a non-directory ancestor with
	// [*NotDirectoryError].
	WriteFile(ctx context.Context, path string, content []byte, wd string) error
	// Exec runs cmd with wd as its working directory and returns the real exit code and the
	// separate output streams. Expiry of timeout yields [*TimeoutError].
	Exec(ctx context.Context, cmd Command, wd string, timeout time.Duration) (ExecResult, error)
	// RunCode evaluates code in the guest runtime.
	RunCode(ctx context.Context, code string, timeout time.Duration) (ExecResult, error)
	// StatFile describes path without following its last component; (nil, nil) when the
	// engine says it does not exist.
	StatFile(ctx context.Context, path, wd string) (*FileStat, error)
	// ReadFile returns a regular file's bytes; above maxBytes it fails with
	// [*TransferCapExceededError] and never truncates.
	ReadFile(ctx context.Context, path, wd string, maxBytes int64) ([]byte, error)
	// Remove deletes path (a link itself, never its target); absent is success; a directory
	// needs recursive.
	Remove(ctx context.Context, path, wd string, recursive bool) error
	// ListDir lists a directory's immediate children.
	ListDir(ctx context.Context, path, wd string) ([]FileStat, error)
	// Reclaim removes a framework-created directory below wd within timeout.
	Reclaim(ctx context.Context, dir, wd string, timeout time.Duration) error
	// Reset restores the pre-input baseline and changes InstanceID.
	Reset(ctx context.Context, timeout time.Duration) error
}

// Backend provides sandboxes. Dispose and DisposeScope never fail the caller: what may remain
// is returned as a value.
type Backend interface {
	Name() string
	Isolation() Isolation
	Declarations() Declarations
	// Acquire gets or creates the sandbox of (key, spec.Kind), reusing a warm one.
	Acquire(ctx context.Context, key Key, spec Spec) (Sandbox, error)
	// Dispose deletes the key's sandboxes (every kind unless opts narrows it).
	Dispose(ctx context.Context, key Key, opts DisposeOptions) *DisposalFailure
	// DisposeScope deletes every sandbox of a conversation by asking the provider, not memory.
	DisposeScope(ctx context.Context, scope, threadID string) ScopePurge
}

// BoundedExec is implemented by sandboxes that can cap a command's combined output before
// buffering it; overflow fails with [*ExecOutputLimitExceededError], never a partial result.
type BoundedExec interface {
	ExecBounded(ctx context.Context, cmd Command, wd string, timeout time.Duration, maxOutputBytes int64) (ExecResult, error)
}

// StreamingExec is implemented by sandboxes that can hand over a command's output while it
// runs. ExecStreaming behaves as Exec (or, with a positive maxOutputBytes, as
// [BoundedExec.ExecBounded]) and also calls emit with each piece of output as it is read:
// stream is "stdout" or "stderr", calls come from one goroutine at a time, in order within a
// stream, and never after ExecStreaming returns; p is valid only during the call. The result
// still carries the whole output, which is authoritative: a failed exec may have emitted
// output the result does not carry.
type StreamingExec interface {
	ExecStreaming(ctx context.Context, cmd Command, wd string, timeout time.Duration, maxOutputBytes int64,
		emit func(stream string, p []byte)) (ExecResult, error)
}
