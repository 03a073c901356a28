package actors

// Freeze markers: what tells a freeze from any other pause, across processes and restarts.
//
// A container is paused for two unrelated reasons: the archive plane's freeze (a file call's
// pause, lifted when the call ends) and a sleep (the engine's idle pause, or an operator's,
// lifted by the next call that needs the guest running). The daemon reports both as "paused".
// An engine that finds a container paused must not take one for the other: a sleep is woken
// and reported as a wake; a freeze a dead process left is thawed and reported as recovered; a
// live freeze of another process is left alone.
//
// Labels cannot record it (they are fixed at create), and nothing the guest can write may
// decide it. So every freeze leaves a marker: before the pause is issued, a file named for the
// daemon's ID and the container is created in a directory of the engine's host and locked
// (flock); it is removed only once the thaw succeeded, and the lock goes with the process
// that held it. Hence, for a paused container:
//
//   - a marker locked by another process: a live freeze of another engine process on this
//     host; left alone (the call is refused for a retry);
//   - a marker nobody locks: a freeze whose process died before its thaw; thawed;
//   - no marker: not a freeze at all, so a sleep (this process's own, which it also remembers,
//     or one made by an engine process since gone) or a pause by someone else; woken.
//
// The record is the absence of a marker, not the presence of one, so a sleep needs no write
// that a crash could lose. A marker costs one file create, lock and unlink per freeze (tens
// of microseconds against the pause's milliseconds). Its scope is the host: engine processes
// that share a remote daemon from different hosts do not see each other's markers, and one of
// them takes another's dead freeze for a sleep, which it wakes the same way (the action is
// the same unpause; only the report differs).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/internal/flock"
)

// freezeMarkers is the marker directory; dir "" keeps no markers (every unclaimed pause then
// reads as a sleep).
type freezeMarkers struct {
	dir string
	log *zap.Logger
}

// markerState is what a probe found for one container.
type markerState int

const (
	markerNone markerState = iota // no freeze left a marker: a pause of another kind
	markerLive                    // a live process holds the marker: its freeze is under way
	markerDead                    // a marker nobody holds: a freeze whose process died
)

// DefaultFreezeMarkerDir is where freeze markers are kept when [WithFreezeMarkers] does not
// say: /run/maf-sandbox/freezes for root, else a directory of the user's in the system's
// temporary directory.
func DefaultFreezeMarkerDir() string {
	if os.Geteuid() == 0 {
		return "/run/maf-sandbox/freezes"
	}
	return filepath.Join(os.TempDir(), "maf-sandbox-"+strconv.Itoa(os.Geteuid()), "freezes")
}

// newFreezeMarkers prepares dir: made 0700 when missing, refused (markers off, logged) when it
// is not a directory of this user's that only this user can write.
func newFreezeMarkers(dir string, log *zap.Logger) freezeMarkers {
	if dir == "" {
		return freezeMarkers{}
	}
	if err := checkMarkerDir(dir); err != nil {
		log.Warn("freeze markers off: a paused container found after a crash is taken for a sleep", zap.String("dir", dir), zap.Error(err))
		return freezeMarkers{}
	}
	return freezeMarkers{dir: dir, log: log}
}

func checkMarkerDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (%s)", dir, fi.Mode().Perm())
	}
	return ownedBySelf(fi)
}

// markerKey names one container's marker: the daemon's own ID (not the endpoint: two engines
// may reach one daemon through different sockets) and the container name.
type markerKey struct{ daemon, name string }

// path is k's marker: the daemon ID's digest and the container name, which the engine derives
// from a small alphabet.
func (m freezeMarkers) path(k markerKey) string {
	sum := sha256.Sum256([]byte(k.daemon))
	return filepath.Join(m.dir, hex.EncodeToString(sum[:8])+"-"+k.name)
}

// markerKey is this container's marker key, or false when markers are off or the daemon's ID
// cannot be read (the caller goes on without a marker).
func (a *containerActor) markerKey(ctx context.Context) (markerKey, bool) {
	if a.b.markers.dir == "" {
		return markerKey{}, false
	}
	id, err := a.b.daemonID(ctx)
	if err != nil {
		a.log.Warn("freeze marker skipped: the daemon's ID is unknown", zap.Error(err))
		return markerKey{}, false
	}
	return markerKey{daemon: id, name: a.name}, true
}

// daemonID is the daemon's own ID (docker info), asked once and remembered.
func (b *Backend) daemonID(ctx context.Context) (string, error) {
	b.daemon.mu.Lock()
	defer b.daemon.mu.Unlock()
	if b.daemon.id != "" {
		return b.daemon.id, nil
	}
	id, err := b.engine.EngineID(ctx)
	if err != nil {
		return "", err
	}
	b.daemon.id = id
	return id, nil
}

// markerHold is one freeze's marker, created and locked; nil when markers are off or the
// marker could not be made (the freeze goes on without it).
type markerHold struct {
	f    *os.File
	path string
	log  *zap.Logger
}

// hold creates and locks k's marker before a pause is issued. Another process's live lock
// on it (a freeze of the same container elsewhere on this host) is waited for briefly; the
// freeze goes on without a marker when that wait or anything else fails.
func (m freezeMarkers) hold(ctx context.Context, k markerKey) *markerHold {
	if m.dir == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p := m.path(k)
	f, err := flock.Lock(ctx, p, true)
	if err != nil {
		m.log.Warn("freeze marker not made; a crash now would leave a pause read as a sleep", zap.String("container", k.name), zap.Error(err))
		return nil
	}
	return &markerHold{f: f, path: p, log: m.log}
}

// release ends the hold: the marker is removed when the container was thawed (or never
// frozen) and kept, unlocked, when it may still be paused, for the next acquire to thaw.
func (h *markerHold) release(thawed bool) {
	if h == nil {
		return
	}
	if thawed {
		if err := os.Remove(h.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			h.log.Warn("remove freeze marker", zap.String("marker", h.path), zap.Error(err))
		}
	}
	_ = h.f.Close() // drops the lock
}

// probe says what k's marker tells of a paused container.
func (m freezeMarkers) probe(k markerKey) markerState {
	if m.dir == "" {
		return markerNone
	}
	p := m.path(k)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return markerNone
	}
	held, err := flock.Held(p)
	if err != nil || held {
		return markerLive // unreadable counts as live: never lift what may be a live freeze
	}
	return markerDead
}

// clear removes a dead marker: its freeze was thawed, or the container runs again.
func (m freezeMarkers) clear(k markerKey) {
	if m.dir == "" {
		return
	}
	if m.probe(k) != markerDead {
		return
	}
	if err := os.Remove(m.path(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("remove freeze marker", zap.String("container", k.name), zap.Error(err))
	}
}

// ownedBySelf refuses a directory another user owns: its owner could swap markers in it.
func ownedBySelf(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not this process's %d", fi.Name(), st.Uid, os.Geteuid())
	}
	return nil
}
