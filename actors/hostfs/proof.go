package hostfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cyphar/filepath-securejoin/pathrs-lite/procfs"
	"golang.org/x/sys/unix"
)

// Instance is what the engine says of a container: its ID, whether it runs, and its init
// process's host pid and start time (State.Pid, State.StartedAt).
type Instance struct {
	ID        string
	Running   bool
	Pid       int
	StartedAt time.Time
}

// Inspector asks the engine about the container now.
type Inspector func(ctx context.Context) (Instance, error)

// startSlack bounds how far the process's own start time may lie from the engine's StartedAt.
// runc starts the init process before the daemon records StartedAt (tens to hundreds of
// milliseconds here); a reused pid belongs to a process started after the container's init
// ended, so it is later than StartedAt by at least the container's run time — the cgroup check
// covers a run shorter than the slack.
const (
	startSlackBefore = 10 * time.Second
	startSlackAfter  = 2 * time.Second
)

// Attach proves that want.Pid is the init process of container want.ID and returns a [Root]
// on it. The order is what makes it race-free:
//
//  1. /proc/<pid> is opened and held (pathrs-lite's procfs, as runc opens it: a private
//     procfs where the kernel allows it, else /proc checked against overmounts): from here the handle names that one process, and every lookup through it fails
//     once the process ends, even if the pid is reused;
//  2. its cgroup (read through the handle) must name the container ID, and its start time is
//     read;
//  3. the engine is asked again: the container must still run, with this ID, this pid and a
//     StartedAt within the slack of the process's start;
//  4. the process must still be alive through the handle, with the same start time.
//
// A process alive at 4 held its pid continuously since 1, so at 3 the engine named this very
// process; the cgroup proves it is inside the container even if the engine's answer was stale.
func Attach(ctx context.Context, want Instance, inspect Inspector) (*Root, error) {
	if want.ID == "" || want.Pid <= 0 || !want.Running {
		return nil, &NotProvenError{ContainerID: want.ID, Pid: want.Pid, Reason: "the container is not running with a known pid"}
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: the engine does not run as root", ErrUnavailable)
	}
	h, err := procfs.OpenProcRoot()
	if err != nil {
		return nil, fmt.Errorf("%w: open /proc: %w", ErrUnavailable, err)
	}
	proc, err := h.OpenPid(want.Pid, "")
	_ = h.Close()
	if err != nil {
		return nil, &NotProvenError{ContainerID: want.ID, Pid: want.Pid, Reason: "open /proc/<pid>: " + err.Error()}
	}
	r := &Root{id: want.ID, pid: want.Pid, proc: proc}
	if err := r.prove(ctx, want, inspect); err != nil {
		_ = proc.Close()
		return nil, err
	}
	r.openRoot = r.procRoot
	return r, nil
}

func (r *Root) prove(ctx context.Context, want Instance, inspect Inspector) error {
	fail := func(reason string) error { return &NotProvenError{ContainerID: want.ID, Pid: want.Pid, Reason: reason} }
	cg, err := r.procRead("cgroup")
	if err != nil {
		return fail("read its cgroup: " + err.Error())
	}
	if !cgroupNames(cg, want.ID) {
		return fail("its cgroup does not name the container")
	}
	ticks, err := r.startTicks()
	if err != nil {
		return fail("read its start time: " + err.Error())
	}
	start, err := wallClock(ticks)
	if err != nil {
		return fail("read the boot clock: " + err.Error())
	}
	now, err := inspect(ctx)
	if err != nil {
		return fmt.Errorf("hostfs: inspect %.12s: %w", want.ID, err)
	}
	switch {
	case now.ID != want.ID:
		return fail("the engine names another container now")
	case !now.Running:
		return fail("the container no longer runs")
	case now.Pid != want.Pid:
		return fail(fmt.Sprintf("the engine now says its pid is %d", now.Pid))
	case now.StartedAt.IsZero():
		return fail("the engine gives no start time")
	case start.Before(now.StartedAt.Add(-startSlackBefore)) || start.After(now.StartedAt.Add(startSlackAfter)):
		return fail(fmt.Sprintf("the process started at %s, the container at %s", start.Format(time.RFC3339Nano), now.StartedAt.Format(time.RFC3339Nano)))
	}
	again, err := r.startTicks()
	if err != nil || again != ticks {
		return fail("the process ended while it was being proven")
	}
	return nil
}

// cgroupNames reports whether some line of /proc/<pid>/cgroup places the process in the
// container's own cgroup: a path element that is the ID (cgroupfs driver, "/docker/<id>") or
// its systemd scope ("docker-<id>.scope").
func cgroupNames(cg []byte, id string) bool {
	for line := range strings.SplitSeq(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for el := range strings.SplitSeq(parts[2], "/") {
			if el == id || el == "docker-"+id+".scope" {
				return true
			}
		}
	}
	return false
}

// procRead reads a file of the held /proc/<pid>; ENOENT or ESRCH once the process ended.
func (r *Root) procRead(name string) ([]byte, error) {
	fd, err := unix.Openat(int(r.proc.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, staleOr(err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, staleOr(err)
	}
	return buf.Bytes(), nil
}

// startTicks is the process's start: field 22 of /proc/<pid>/stat, clock ticks since boot.
func (r *Root) startTicks() (int64, error) {
	b, err := r.procRead("stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unreadable stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("short stat")
	}
	return strconv.ParseInt(f[19], 10, 64) // field 22; f[0] is field 3
}

// wallClock converts clock ticks since boot to wall-clock time.
func wallClock(ticks int64) (time.Time, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}, err
	}
	sinceStart := time.Duration(ts.Nano()) - time.Duration(ticks)*time.Second/100 // USER_HZ is 100 on Linux
	return time.Now().Add(-sinceStart), nil
}

// procRoot opens the held process's root; once the process ended it fails with [ErrStale].
func (r *Root) procRoot() (int, error) {
	fd, err := unix.Openat(int(r.proc.Fd()), "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, staleOr(err)
	}
	return fd, nil
}

func staleOr(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: %w", ErrStale, err)
	}
	return err
}
