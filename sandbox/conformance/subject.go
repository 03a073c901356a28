package conformance

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Subject is the seam a backend fills so the probes can plant their layout and attack it
// (protocol §14.1). Planting is the subject's job because making a link is the guest's move:
// a sandbox that offered it would hand the attacker the tool.
type Subject interface {
	// Sandbox is the sandbox under attack, already acquired.
	Sandbox() sandbox.Sandbox
	// WorkingDirectory is the absolute guest path the probes resolve their paths against.
	WorkingDirectory() string
	// Capabilities is the backend's real declared set, never a narrower one: it decides which
	// probes run, and a narrower set would attack less than the backend promised.
	Capabilities() sandbox.CapabilitySet
	// PlantFile creates a regular file at the absolute guest path abs, parents included.
	PlantFile(ctx context.Context, abs string, content []byte) error
	// PlantSymlink creates a link at the absolute guest path abs pointing at target,
	// replacing a link already there and creating missing parents.
	PlantSymlink(ctx context.Context, abs, target string) error
}

// PathObserver is implemented by subjects that can tell whether a guest path is there
// without the capabilities under test. The reclaim suite, which no exec capability admits in
// principle, asks it what survived; a subject without it is asked through Exec.
type PathObserver interface {
	// Exists reports whether anything is at the absolute guest path abs. The last component
	// is not followed: a dangling link is still there.
	Exists(ctx context.Context, abs string) (bool, error)
}

// PlantTimeout bounds each command [PosixGuestSubject] and the probes run in the guest to
// plant or look at their fixtures.
const PlantTimeout = 60 * time.Second

// plantLinkScript makes the link's parent and then the link. ln -sfn replaces a link already
// at the path instead of creating one inside the directory it points to; mkdir -p is a no-op
// when the parent exists.
const plantLinkScript = `mkdir -p -- "$1" && ln -sfn -- "$2" "$3"`

// existsScript is test -e, then test -L for a dangling link. Exit 1 means absent; anything
// above it is test failing to run (127: not found), which must not read as absence.
const existsScript = `test -e "$1" || test -L "$1"`

// PosixGuestSubject is a [Subject] for a POSIX guest: files are planted through WriteFile
// with the file's own parent as the working directory (so fixtures outside the working
// directory can be planted), links through the guest's own mkdir -p and ln -sfn. Its image
// needs sh, mkdir, ln and test; those are requirements of this harness, not of the protocol.
type PosixGuestSubject struct {
	sb   sandbox.Sandbox
	wd   string
	caps sandbox.CapabilitySet
}

var (
	_ Subject      = (*PosixGuestSubject)(nil)
	_ PathObserver = (*PosixGuestSubject)(nil)
)

// NewPosixGuestSubject builds the subject for sb, whose probes resolve against the absolute
// working directory wd, and caps, which must be the backend's declared capabilities. It fails
// with [*sandbox.InvalidArgumentError] for a nil sandbox or a relative working directory.
func NewPosixGuestSubject(sb sandbox.Sandbox, wd string, caps sandbox.CapabilitySet) (*PosixGuestSubject, error) {
	if sb == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "conformance: the subject needs a sandbox"}
	}
	if !path.IsAbs(wd) {
		return nil, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("conformance: the working directory %q is not absolute", wd)}
	}
	return &PosixGuestSubject{sb: sb, wd: wd, caps: caps.Clone()}, nil
}

// Sandbox is the sandbox under attack.
func (p *PosixGuestSubject) Sandbox() sandbox.Sandbox { return p.sb }

// WorkingDirectory is the absolute working directory the probes resolve against.
func (p *PosixGuestSubject) WorkingDirectory() string { return p.wd }

// Capabilities is the declared set the subject was built with.
func (p *PosixGuestSubject) Capabilities() sandbox.CapabilitySet { return p.caps.Clone() }

// PlantFile writes content at abs through WriteFile with the file's parent ("/" for a file
// at the root) as the working directory, so its parents are created as any write creates
// them. It fails with what WriteFile returns.
func (p *PosixGuestSubject) PlantFile(ctx context.Context, abs string, content []byte) error {
	abs = paths.Normalize(abs)
	if !path.IsAbs(abs) {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("conformance: plant path %q is not absolute", abs)}
	}
	return p.sb.WriteFile(ctx, abs, content, path.Dir(abs))
}

// PlantSymlink runs mkdir -p on the link's parent and then ln -sfn target abs, as one sh -c
// in the guest with working directory "/" and a [PlantTimeout] timeout. A non-zero exit
// fails with the exit code and the guest's stderr.
func (p *PosixGuestSubject) PlantSymlink(ctx context.Context, abs, target string) error {
	abs = paths.Normalize(abs)
	if !path.IsAbs(abs) {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("conformance: plant path %q is not absolute", abs)}
	}
	res, err := p.sb.Exec(ctx, sandbox.Argv("sh", "-c", plantLinkScript, "plant-symlink", path.Dir(abs), target, abs), "/", PlantTimeout)
	if err != nil {
		return fmt.Errorf("plant link %s -> %s: %w", abs, target, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("plant link %s -> %s: the guest exited %d: %s", abs, target, res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	return nil
}

// Exists asks the guest whether anything is at abs, a dangling link included.
func (p *PosixGuestSubject) Exists(ctx context.Context, abs string) (bool, error) {
	return guestExists(ctx, p.sb, abs)
}

// errGuest marks a guest command that could not answer the question asked of it.
var errGuest = errors.New("guest command failed")

// guestExists runs [existsScript] in the guest from "/".
func guestExists(ctx context.Context, sb sandbox.Sandbox, abs string) (bool, error) {
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", existsScript, "exists", abs), "/", PlantTimeout)
	if err != nil {
		return false, err
	}
	switch res.ExitCode {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, fmt.Errorf("%w: could not see whether %s is there (exit %d): %s", errGuest, abs, res.ExitCode, strings.TrimSpace(res.StderrText()))
}

// guestTest runs test with one flag on p, from wd: true on exit 0, false on exit 1.
func guestTest(ctx context.Context, sb sandbox.Sandbox, flag, p, wd string) (bool, error) {
	res, err := sb.Exec(ctx, sandbox.Argv("test", flag, p), wd, PlantTimeout)
	if err != nil {
		return false, err
	}
	switch res.ExitCode {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, fmt.Errorf("%w: test %s %s exited %d: %s", errGuest, flag, p, res.ExitCode, strings.TrimSpace(res.StderrText()))
}

// guestCat reads p through the guest's cat, from wd.
func guestCat(ctx context.Context, sb sandbox.Sandbox, p, wd string) ([]byte, error) {
	res, err := sb.Exec(ctx, sandbox.Argv("cat", p), wd, PlantTimeout)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("%w: cat %s exited %d: %s", errGuest, p, res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	return res.StdoutBytes, nil
}

// guestRun runs argv from wd and fails unless it exits 0.
func guestRun(ctx context.Context, sb sandbox.Sandbox, wd string, argv ...string) (sandbox.ExecResult, error) {
	res, err := sb.Exec(ctx, sandbox.Argv(argv...), wd, PlantTimeout)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, fmt.Errorf("%w: %s exited %d: %s", errGuest, paths.QuoteArgv(argv), res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	return res, nil
}

// exists asks s whether abs is there: through its own [PathObserver] when it has one,
// otherwise through the guest.
func exists(ctx context.Context, s Subject, abs string) (bool, error) {
	if o, ok := s.(PathObserver); ok {
		return o.Exists(ctx, abs)
	}
	return guestExists(ctx, s.Sandbox(), abs)
}
