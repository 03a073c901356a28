package hosttools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// countingSandbox counts the supervisor's file-plane reads and keeps the sandbox's streamed
// exec, so the watcher hint is still chosen.
type countingSandbox struct {
	sandbox.Sandbox
	reads atomic.Int64
}

func (c *countingSandbox) ReadFile(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	c.reads.Add(1)
	return c.Sandbox.ReadFile(ctx, p, wd, maxBytes)
}

func (c *countingSandbox) ExecStreaming(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration,
	maxOutputBytes int64, emit func(stream string, p []byte)) (sandbox.ExecResult, error) {
	return c.Sandbox.(sandbox.StreamingExec).ExecStreaming(ctx, cmd, wd, timeout, maxOutputBytes, emit)
}

// assertNoWatcher waits (bounded) for the hint watcher of a finished run to be gone: it
// exits on its own once host_tools/ is removed.
func assertNoWatcher(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	// The bracket keeps this command's own cmdline from matching.
	cmd := sandbox.Shell(`grep -l 'hint[ ]watcher' /proc/[0-9]*/cmdline 2>/dev/null | wc -l`)
	var out string
	for range 50 {
		res, err := sb.Exec(itest.Context(t), cmd, "/", 30*time.Second)
		if err != nil {
			t.Fatalf("look for the watcher: %v", err)
		}
		if out = strings.TrimSpace(res.Stdout()); out == "0" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s hint watcher processes outlived their run", out)
}

func pingTool(calls *atomic.Int64) hosttools.Tool {
	return hosttools.Tool{Name: "ping", Declaration: &hosttools.Declaration{}, AnyArguments: true,
		Func: func(context.Context, hosttools.Arguments) (any, error) { calls.Add(1); return "pong", nil }}
}

// TestHostToolsHintWakes: with a 30 s poll, a call made after the first look is answered
// only because the watcher's hint woke the supervisor; with hints off, the same program
// runs out its 3 s bound. The watcher is gone after each run.
func TestHostToolsHintWakes(t *testing.T) {
	var calls atomic.Int64
	env := newHostToolsEnv(t, nil, pingTool(&calls))
	sb := env.acquire(t)
	const program = "import time, maf_host_tools\ntime.sleep(0.3)\nprint(maf_host_tools.ping())\n"
	res, err := runPython(t, sb, env.reg.NewRun(), program, 20*time.Second, hosttools.WithPollInterval(30*time.Second))
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout()) != "pong" {
		t.Fatalf("hinted run: %v, exit %d, %q", err, res.ExitCode, res.Stdout())
	}
	assertNoWatcher(t, sb)

	_, err = runPython(t, sb, env.reg.NewRun(), program, 3*time.Second,
		hosttools.WithPollInterval(30*time.Second), hosttools.WithHint(nil))
	if pte := (*sandbox.ProgramTimeoutError)(nil); !errors.As(err, &pte) {
		t.Fatalf("unhinted run with a 30 s poll: %v; want a ProgramTimeoutError", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("tool calls %d, want 1", calls.Load())
	}
}

// forgeProgram writes into the watcher's own stdout (/proc/<pid>/fd/1, which the guest can
// open): garbage, an over-long line, names of requests that do not exist, a path; then calls
// once; then floods a forged name every millisecond for FLOOD seconds; then calls again.
const forgeProgram = `
import os, time, maf_host_tools
pids = []
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            c = open("/proc/%s/cmdline" % d, "rb").read()
        except OSError:
            continue
        if b"hint watcher" in c and b"-c" in c:
            pids.append(d)
fds = [open("/proc/%s/fd/1" % p, "wb", buffering=0) for p in pids]
for f in fds:
    f.write(b"\x00\xff garbage\n" + b"x" * 5000 + b"0001.request.json\n0009.request.json\n../../etc/passwd\nprogram_exit_code\n")
print("watchers", len(fds))
print(maf_host_tools.ping(i=1))
t = time.monotonic()
while time.monotonic() - t < FLOOD:
    for f in fds:
        f.write(b"0002.request.json\n")
    time.sleep(0.001)
print(maf_host_tools.ping(i=2))
`

// TestHostToolsHintForged: lines the guest forges into the watcher's stdout change nothing
// (every request is still read and checked through the file plane: two calls, two answers),
// and a flood of forged names buys no more looks than the poll gives: a hint whose look
// found nothing makes the next one wait longer, up to the poll interval.
func TestHostToolsHintForged(t *testing.T) {
	var calls atomic.Int64
	env := newHostToolsEnv(t, nil, pingTool(&calls))
	cs := &countingSandbox{Sandbox: env.acquire(t)}
	const flood, poll = 2.0, 200 * time.Millisecond
	start := time.Now()
	res, err := runPython(t, cs, env.reg.NewRun(), strings.ReplaceAll(forgeProgram, "FLOOD", fmt.Sprint(flood)),
		time.Minute, hosttools.WithPollInterval(poll))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("RunProgram: %v, exit %d, %s%s", err, res.ExitCode, res.Stdout(), res.Stderr())
	}
	if want := "watchers 1\npong\npong\n"; res.Stdout() != want || calls.Load() != 2 {
		t.Fatalf("output %q with %d tool calls; want %q and 2", res.Stdout(), calls.Load(), want)
	}
	// Unhinted, the run's seconds cost ran/poll looks (the run lasts the flood and the
	// program's start and calls, longer on a loaded machine: the bound follows the run's own
	// time, not the flood's nominal one); the hint may add the few of its backoff (10, 20, ...
	// ms up to the poll) and the calls' own. A look is at most two reads.
	ran := max(time.Since(start).Seconds(), flood)
	limit := int64(2 * (ran/poll.Seconds() + 12))
	t.Logf("%d file-plane reads over a %.1f s run with a %.0f s flood of forged hints (limit %d)", cs.reads.Load(), ran, flood, limit)
	if cs.reads.Load() > limit {
		t.Fatalf("%d reads: the forged hints bought more looks than the poll gives (limit %d)", cs.reads.Load(), limit)
	}
	assertNoWatcher(t, cs)
}

// TestHostToolsHintBusybox: an image with no python3 has no watcher; the watcher's exec says
// "none", ends, and the run keeps the poll. The call here is made by hand in sh, over the
// same wire protocol.
func TestHostToolsHintBusybox(t *testing.T) {
	var calls atomic.Int64
	env := newHostToolsEnv(t, nil, pingTool(&calls))
	env.spec = respec(t, env.spec, dockertest.Busybox(t))
	sb := env.acquire(t)
	l, err := hosttools.NewLayout(hosttools.RandomRunDir("/maf-sandbox/work"), "program.sh")
	if err != nil {
		t.Fatal(err)
	}
	const program = `c=../host_tools/host_tool_calls; mkdir -p $c; : > $c/0001.claim
printf '{"id":"0001","name":"ping","arguments":{}}' > $c/0001.request.json.part
mv $c/0001.request.json.part $c/0001.request.json
while [ ! -s $c/0001.response.json ]; do sleep 0.05; done; cat $c/0001.response.json`
	res, err := hosttools.RunProgram(itest.Context(t), sb, env.reg.NewRun(), l, []byte(program), time.Minute,
		hosttools.WithInterpreter("sh"), hosttools.WithPollInterval(50*time.Millisecond))
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout(), `"pong"`) {
		t.Fatalf("RunProgram: %v, exit %d, %q", err, res.ExitCode, res.Stdout())
	}
	if st, serr := sb.StatFile(itest.Context(t), hosttools.TransportDir, l.Dir); serr != nil || st != nil {
		t.Fatalf("host_tools/ after the run: %+v, %v", st, serr)
	}
	if err := hosttools.ReclaimRun(itest.Context(t), sb, l, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	assertNoWatcher(t, sb)
}

// respec is spec on another image.
func respec(t *testing.T, spec sandbox.Spec, image string) sandbox.Spec {
	t.Helper()
	s, err := sandbox.NewSpec(spec.Kind, sandbox.WithImage(image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.HostTools),
		sandbox.WithHostTools(*spec.HostTools))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
