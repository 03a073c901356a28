package hostfs

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Cred is the guest identity a removal runs with: the file-system uid and gid the kernel checks
// permissions against, and whether the container runs without capabilities (a guest uid 0
// then has no DAC override either).
type Cred struct {
	UID, GID int
	NoCaps   bool
}

// asGuest runs fn on a thread of its own whose file credentials are the guest's: fsuid, fsgid,
// the guest's gid as the only supplementary group, and for a capability-less guest root no
// effective capabilities. The kernel then refuses exactly what it would refuse the guest
// (setfsuid from 0 to another uid clears the file capabilities). The changes are made with
// per-thread system calls on a locked thread that is never unlocked, so the runtime ends the
// thread with the goroutine and no other goroutine ever runs with them.
func asGuest(c Cred, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := becomeGuest(c); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

func becomeGuest(c Cred) error {
	if err := unix.Setgroups([]int{c.GID}); err != nil { // x/sys: this thread only
		return fmt.Errorf("hostfs: set the guest's groups: %w", err)
	}
	unix.Setfsgid(c.GID)
	unix.Setfsuid(c.UID)
	if got, _ := unix.SetfsuidRetUid(-1); got != c.UID {
		return fmt.Errorf("hostfs: fsuid is %d, want the guest's %d", got, c.UID)
	}
	if got, _ := unix.SetfsgidRetGid(-1); got != c.GID {
		return fmt.Errorf("hostfs: fsgid is %d, want the guest's %d", got, c.GID)
	}
	if c.UID == 0 && c.NoCaps {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return fmt.Errorf("hostfs: read capabilities: %w", err)
		}
		data[0].Effective, data[1].Effective = 0, 0
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("hostfs: drop capabilities: %w", err)
		}
	}
	return nil
}
