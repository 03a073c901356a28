package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync"
)

// The kernel's own count of the processes it killed for memory in the container's cgroup:
// memory.oom_control's oom_kill under cgroup v1, memory.events' under v2, both as the
// container sees its cgroup at /sys/fs/cgroup. A process whose end is a SIGKILL the
// supervisor did not send (or a shell reporting one, 137) while the count rose since it
// started is recorded as killed for memory; each kill the count records is claimed by one
// process at most. The count is the cgroup's, not a process's: two processes ending by
// SIGKILL at once, one of them by the kernel, cannot be told apart, and the first to end
// claims the kill.
var oomCounterFiles = []string{
	"/sys/fs/cgroup/memory/memory.oom_control",
	"/sys/fs/cgroup/memory.events",
}

type oomCounter struct {
	mu      sync.Mutex
	path    string // "" when no counter is readable
	claimed int64  // the count up to which kills are accounted for
}

func (c *oomCounter) init() {
	for _, p := range oomCounterFiles {
		if _, ok := readOOMKills(p); ok {
			c.path = p
			break
		}
	}
	c.claimed = c.read()
}

// read is the count now (-1 without a counter).
func (c *oomCounter) read() int64 {
	if c.path == "" {
		return -1
	}
	n, ok := readOOMKills(c.path)
	if !ok {
		return -1
	}
	return n
}

// claim reports whether a kill the counter recorded since base is not yet claimed, and
// claims it.
func (c *oomCounter) claim(base int64) bool {
	now := c.read()
	if now < 0 || base < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	from := max(base, c.claimed)
	if now <= from {
		return false
	}
	c.claimed = from + 1
	return true
}

func readOOMKills(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("oom_kill ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
