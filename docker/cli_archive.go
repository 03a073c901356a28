package docker

import (
	"context"
	"errors"
	"fmt"
)

// Stat implements [Engine]. It reads the header only: the client is stopped as soon as the
// header is in hand, so a directory's subtree or a file's body never crosses the pipe.
func (c *cliDriver) Stat(ctx context.Context, target, guestPath string) (*Entry, error) {
	return statAnswer(c.copyOut(ctx, target, guestPath, -1))
}

// Read implements [Engine].
func (c *cliDriver) Read(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error) {
	if err := checkReadCap(guestPath, maxBytes); err != nil {
		return nil, nil, err
	}
	return c.copyOut(ctx, target, guestPath, maxBytes)
}

// copyOut runs `cp <target>:<guestPath> -` and reads the first entry of the archive as it
// streams ([archiveRead]). The client is stopped as soon as that is read.
func (c *cliDriver) copyOut(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error) {
	r, err := newArchiveRead(target, guestPath, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	args := r.args()
	res, err := c.run(ctx, invocation{args: args, timeout: c.cfg.CommandTimeout, consume: r.consume})
	if err != nil {
		return nil, nil, err
	}
	if res.StdoutRead == 0 && !res.Stopped && res.ExitCode != 0 {
		return nil, nil, c.copyOutFailure(ctx, r.verb(), target, guestPath, args, res)
	}
	if errors.Is(r.err, errNoTarHeader) && res.ExitCode != 0 && !res.Stopped {
		return nil, nil, fmt.Errorf("%s %s: docker returned no tar header: %w", r.verb(), guestPath, fail(args, target, res))
	}
	return r.answer()
}

// copyOutFailure classifies a copy that failed before any byte of archive: path absence (both
// forms), the container's absence, or a failure.
func (c *cliDriver) copyOutFailure(ctx context.Context, verb, target, guestPath string, args []string, res result) error {
	if isPathAbsentNamed(res.Stderr, guestPath) {
		return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPathAbsent}
	}
	if isPathAbsentOlderClient(res.Stderr, target, guestPath) {
		if !fullID.MatchString(target) {
			return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPathAbsentUnconfirmed}
		}
		info, err := c.Inspect(ctx, target)
		if err != nil {
			return fmt.Errorf("%s %s: confirm instance: %w", verb, guestPath, err)
		}
		if info.ID != target {
			return fmt.Errorf("%s %s: confirm instance: %s answered as %s", verb, guestPath, target, info.ID)
		}
		return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPathAbsent}
	}
	return fmt.Errorf("docker could not %s %s: %w", verb, guestPath, fail(args, target, res))
}

// CopyIn implements [Engine].
func (c *cliDriver) CopyIn(ctx context.Context, target string, tarball []byte) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	if len(tarball) == 0 {
		return fmt.Errorf("copy into %s: %w: empty archive", target, ErrInvalid)
	}
	args := []string{"cp", "-", target + ":/"}
	res, err := c.run(ctx, invocation{args: args, stdin: tarball, timeout: c.cfg.CommandTimeout})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		ce := failure(args, target, res)
		if ce.Class == nil {
			// The docker 28 client answers a missing container here with `destination
			// "<target>:/" must be a directory`, naming no absence; ask the engine instead.
			if _, err := c.Inspect(ctx, target); errors.Is(err, ErrNotFound) {
				ce.Class = ErrNotFound
			}
		}
		return fmt.Errorf("copy into %s: %w", target, ce)
	}
	return nil
}
