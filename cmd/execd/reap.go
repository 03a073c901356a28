package main

import (
	"sync"
	"syscall"
)

// supervisor holds the environment every command gets and the commands waited for.
type supervisor struct {
	env   []string
	procs *procTable // the processes it owns (process.go)

	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus // pid → its command's exit
}

// reap collects every child that ended: a command's status goes to its connection, an
// orphan's (a daemonised grandchild re-parented to PID 1) is dropped. It holds the lock for
// the whole sweep and spawn holds it across fork and registration, so no command's status is
// collected before it is waited for.
func (s *supervisor) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := s.waiting[pid]; ok {
			delete(s.waiting, pid)
			ch <- ws
		}
	}
}

// exitCode renders a status as docker exec reports it: the exit status, or 128 plus the signal.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
