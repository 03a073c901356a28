package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeDocker is a shell script standing in for the docker client at binding. It answers
// `context inspect` from FAKE_CONTEXT_JSON (exit FAKE_CONTEXT_EXIT, after FAKE_CONTEXT_DELAY
// seconds, with FAKE_CONTEXT_STDERR on stderr) and logs every invocation, with the DOCKER_HOST
// it saw, to FAKE_LOG.
const fakeDocker = `#!/bin/sh
[ -n "$FAKE_LOG" ] && echo "DOCKER_HOST=$DOCKER_HOST $*" >> "$FAKE_LOG"
if [ "$1" = context ]; then
	[ -n "$FAKE_CONTEXT_DELAY" ] && sleep "$FAKE_CONTEXT_DELAY"
	printf '%s' "$FAKE_CONTEXT_JSON"
	[ -n "$FAKE_CONTEXT_STDERR" ] && printf '%s\n' "$FAKE_CONTEXT_STDERR" >&2
	exit "${FAKE_CONTEXT_EXIT:-0}"
fi
echo "fake docker: the engine ran $1" >&2
exit 99
`

const defaultContextJSON = `{"Name":"fake","Endpoints":{"docker":{"Host":"unix:///fake.sock"}}}`

// fakeClient writes the fake client and returns the config that names it and the path of its
// call log. env entries (K=V) are set in the process environment first, so they land in the
// snapshot of an engine built from the config.
func fakeClient(t *testing.T, env ...string) (Config, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "docker")
	if err := os.WriteFile(bin, []byte(fakeDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	t.Setenv("FAKE_LOG", logPath)
	t.Setenv("FAKE_CONTEXT_JSON", defaultContextJSON)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return Config{DockerPath: bin, CommandTimeout: 10 * time.Second}, logPath
}

// testCtx is a context for one call, ended with the test.
func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func readLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// ChildProcesses lists the processes whose parent is this test binary, as "pid cmdline".
func ChildProcesses(t testing.TB) []string {
	t.Helper()
	return processes(t, func(_ int, ppid int, _ string) bool { return ppid == os.Getpid() })
}

// processesWithCmdline lists processes whose NUL-joined command line is exactly cmdline.
func processesWithCmdline(t testing.TB, cmdline string) []string {
	t.Helper()
	return processes(t, func(_ int, _ int, cl string) bool { return cl == cmdline })
}

func processes(t testing.TB, match func(pid, ppid int, cmdline string) bool) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat)[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmdline := strings.TrimRight(string(cl), "\x00")
		if match(pid, ppid, cmdline) {
			out = append(out, fmt.Sprintf("%d %s (%s)", pid, strings.ReplaceAll(cmdline, "\x00", " "), f[0]))
		}
	}
	return out
}

// waitNoChildren fails the test if children of the test binary remain after a short grace.
func waitNoChildren(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := ChildProcesses(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leftover child processes: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
