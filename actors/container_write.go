package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// Staged writes. The daemon's archive extraction replaces a file by unlinking it and then
// streaming the new body under its name, so an archive cut short (the engine killed in the
// middle of a transfer) leaves the name holding a prefix of the new bytes and the old content
// gone. The archive plane has no rename, and the daemon refuses exec while the guest is frozen,
// so the write stages instead, all in one archive under the freeze:
//
//  1. the content under an unguessable staging name beside the target (same directory, so the
//     same filesystem);
//  2. a hard link at the target's name to the staging name. The daemon removes the old entry
//     and links the new one while it handles that one header, after the whole body has
//     arrived: a cut archive stops before it, and the target keeps its old content.
//
// After the thaw the staging name is a second name of the file; rm -f removes it, run as the
// guest (whatever the guest could have swapped by then, removing a random name with its own
// authority is what it could do itself), and as root only when every directory from / down is
// the host's (the reach rule, §6.5). That rm is the only guest command a write runs, so a
// write stages only on an instance whose rm passed the image command probe; on any other
// instance (an image without rm) it writes in place, as before. So does a write into a
// directory where neither may remove the name (a root-owned directory below one of the
// guest's): the first write there leaves its staging name, the later ones go in place.

// stagingPrefix begins every staging name: a dot file, so it stays out of plain listings, and
// a fixed form (stagingPrefix + 32 hex digits) so a leftover can be recognised and swept.
const stagingPrefix = ".maf-write-"

// maxStagingPath keeps the staging path within Linux's PATH_MAX (4096 with its NUL): a target
// whose staging name would be longer is written in place.
const maxStagingPath = 4095

// stagingFor returns the staging name for a write of abs, or "" when the write goes in place.
// It runs before the freeze: the rm check it may make is an exec, and its error fails the
// write, because an exec that did not complete may still be starting, and a freeze racing an
// exec's start wedges the container (see handle).
func (a *containerActor) stagingFor(ctx context.Context, target, abs string) (string, error) {
	name := parentOf(abs)
	if name != "/" {
		name += "/"
	}
	name += stagingPrefix + stagingToken()
	if len(name) > maxStagingPath || a.inPlace[parentOf(abs)] == target {
		return "", nil
	}
	ok, err := a.canRemoveStaging(ctx, target)
	if err != nil || !ok {
		return "", err
	}
	return name, nil
}

// stagingToken is 128 random bits in hex: no guest can plant anything at a name it cannot
// predict before the freeze, and none can act on it during the freeze.
func stagingToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// canRemoveStaging reports whether the instance's rm answers the image command probe
// (`rm -rf --`, exit 0). A files_delete workload ran it at acquire; any other asks here, on
// its first write, and the answer is kept for the instance.
func (a *containerActor) canRemoveStaging(ctx context.Context, target string) (bool, error) {
	if a.probedID != target || a.probed == nil {
		a.probedID, a.probed = target, map[string]bool{}
	}
	if ok, asked := a.probed["rm"]; asked {
		return ok, nil
	}
	pctx, cancel := context.WithTimeout(ctx, min(10*time.Second, a.b.commandTimeout()))
	defer cancel()
	out, err := a.b.engine.Exec(pctx, docker.ExecRequest{Target: target, WorkDir: "/", Argv: []string{"rm", "-rf", "--"}, MaxOutputBytes: 1024})
	if errors.Is(err, docker.ErrExecNotStarted) {
		err = nil // the image has no rm it can run: a failed probe, as a non-zero status is
	}
	if err != nil {
		return false, fmt.Errorf("check the image's rm before writing in %s: %w", a.name, err)
	}
	a.probed["rm"] = out.ExitCode == 0
	if out.ExitCode != 0 {
		a.log.Info("the image's rm failed the probe: writes go in place, and a crash during one can tear it",
			zap.Int("status", out.ExitCode))
	}
	return out.ExitCode == 0, nil
}

// dropStaging removes a write's staging name after the thaw, whatever became of the archive,
// and settles the write's outcome. A write that failed keeps its error; one that landed
// succeeds even when the name could not go (it is logged), unless removing it timed out,
// which discards the container like any exec timeout.
func (a *containerActor) dropStaging(ctx context.Context, target, wd, userPath, staging string, writeErr error) error {
	if errors.Is(writeErr, docker.ErrNotFound) {
		return writeErr // the instance is gone, and the staging name with it
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.b.commandTimeout())
	defer cancel()
	err := a.removeStaging(ctx, target, wd, staging)
	var timeout *sandbox.TimeoutError
	switch {
	case err == nil:
		return writeErr
	case writeErr != nil:
		a.log.Warn("a failed write left its staging name", zap.String("staging", staging), zap.Error(err))
		return writeErr
	case errors.As(err, &timeout):
		return fmt.Errorf("wrote %s, then removing its staging name %s: %w", userPath, staging, err)
	}
	a.log.Warn("wrote the file; its staging name is left beside it", zap.String("staging", staging), zap.Error(err))
	return nil
}

// removeStaging removes the staging name with rm -f (never -r: a directory the guest made at
// the name stays) through the one guarded removal, guest first: root runs only where the reach
// rule allows it.
func (a *containerActor) removeStaging(ctx context.Context, target, wd, staging string) error {
	err := a.removeGuarded(ctx, target, removal{op: "remove", shown: staging, abs: staging, wd: wd,
		timeout: a.b.commandTimeout(), guestFirst: true})
	var pe *sandbox.PathError
	if errors.As(err, &pe) {
		// Neither the guest nor, by the reach rule, root may remove names here: stop staging
		// in this directory, so at most one name is ever left in it.
		if a.inPlace == nil {
			a.inPlace = map[string]string{}
		}
		a.inPlace[parentOf(staging)] = target
		return fmt.Errorf("%w; later writes in %s go in place", err, parentOf(staging))
	}
	return err
}
