package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecKeepsTheProcessRootReadable runs the gate as a workload's first process would and
// reads /proc/<pid>/root of it, through a descriptor held from its start as the engine's host
// file plane holds it, all through the release and the exec. The root must never read as gone:
// an exec from a thread other than the group's leader retires the leader and, until its PID
// passes to the exec'ing thread, the root reads ENOENT, which the engine takes for a dead
// container. The gate sleeps on its release for a while first, so that without the gate's
// LockOSThread its main goroutine would often resume on another thread.
func TestExecKeepsTheProcessRootReadable(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep program: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gate")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the gate: %v\n%s", err, out)
	}
	const token = "0123456789abcdef0123456789abcdef"
	for run := range 10 {
		gone := gateRun(t, bin, token, sleep)
		os.Remove(bin + "." + token)
		if gone > 0 {
			t.Fatalf("run %d: /proc/<pid>/root of the gate read as gone %d times across its exec", run, gone)
		}
	}
}

// gateRun starts the gate (its proxy refuses, so only the release file frees it), writes the
// release file after 100 ms, and counts the ENOENT reads of the process's root until the
// process runs sleep.
func gateRun(t *testing.T, bin, token, sleep string) (gone int) {
	t.Helper()
	cmd := exec.Command(bin, "127.0.0.1:1", token, sleep, "30")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	dir, err := syscall.Open(fmt.Sprintf("/proc/%d", pid), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dir)
	release := time.Now().Add(100 * time.Millisecond)
	released := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !released && time.Now().After(release) {
			if err := os.WriteFile(bin+"."+token, nil, 0o444); err != nil {
				t.Fatal(err)
			}
			released = true
		}
		fd, err := syscall.Openat(dir, "root", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		switch {
		case err == syscall.ENOENT:
			gone++
		case err != nil:
			t.Fatalf("open the gate's root: %v", err)
		default:
			syscall.Close(fd)
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(comm)) == filepath.Base(sleep) {
			return gone
		}
	}
	t.Fatalf("the gate never ran %s: %s", sleep, stderr.Bytes())
	return gone
}
