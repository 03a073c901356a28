package demo

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/sandbox"
)

// sleepIdle is how long the demo's sandbox waits for its sleep: its own sleep time (the spec's
// sleep), short so the demo shows it.
const sleepIdle = 2 * time.Second

// sleepStep shows a sandbox paused when idle (its own sleep time, set on its spec), woken by its
// next command with its processes kept, then a snapshot of it forked into two new sandboxes that
// each start from it and do not see each other's writes.
func sleepStep(ctx context.Context, step func(string, ...any), remote *client.Backend, image, dockerPath string) error {
	key := sandbox.Key{Scope: scope, ThreadID: fmt.Sprintf("sleep%d", time.Now().UnixNano()), AgentID: "coder"}
	spec, err := sandbox.NewSpec("sleeper", sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut),
		sandbox.WithSleep(sleepIdle, 0))
	if err != nil {
		return err
	}
	defer remote.DisposeScope(context.WithoutCancel(ctx), key.Scope, key.ThreadID)
	sb, err := remote.Acquire(ctx, key, spec)
	if err != nil {
		return err
	}
	if _, err := sb.Exec(ctx, sandbox.Shell("echo 'state before the sleep' > /note && { setsid sleep 3600 >/dev/null 2>&1 </dev/null & echo $! > /pid; }"), "/", time.Minute); err != nil {
		return err
	}
	step("sandbox %.12s acquired with a sleep time of %s; it started a background process", sb.InstanceID(), sleepIdle)
	deadline := time.Now().Add(30 * time.Second)
	for state(ctx, dockerPath, sb.InstanceID()) != "paused" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // the demo watches the daemon, as an operator would
	}
	step("after %s with no call, docker says the sandbox is %q: its processes frozen, using no CPU", sleepIdle, state(ctx, dockerPath, sb.InstanceID()))
	began := time.Now()
	res, err := sb.Exec(ctx, sandbox.Shell(`kill -0 "$(cat /pid)" && echo "background process $(cat /pid) still there"`), "/", time.Minute)
	if err != nil {
		return err
	}
	step("its next command woke it (%s, wake included): %s; docker now says %q",
		time.Since(began).Round(time.Millisecond), strings.TrimSpace(res.Stdout()), state(ctx, dockerPath, sb.InstanceID()))
	if !remote.Declarations().EffectiveCapabilities().Has(sandbox.Fork) {
		step("snapshots are not kept here: no fork")
		return nil
	}
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = remote.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID) }()
	step("snapshot %s: %d bytes of changes against image %.19s (files only: no memory, no processes)", snap.ID, snap.Bytes, snap.Image)
	forks := []sandbox.Key{{Scope: scope, ThreadID: key.ThreadID, AgentID: "try-a"}, {Scope: scope, ThreadID: key.ThreadID, AgentID: "try-b"}}
	began = time.Now()
	sbs, err := remote.Fork(ctx, snap.ID, forks, spec)
	if err != nil {
		return err
	}
	step("forked it into %d new sandboxes in %s", len(sbs), time.Since(began).Round(time.Millisecond))
	for i, f := range sbs {
		if _, err := f.Exec(ctx, sandbox.Shell(fmt.Sprintf("echo 'attempt %d' >> /note", i+1)), "/", time.Minute); err != nil {
			return err
		}
	}
	for i, f := range sbs {
		res, err := f.Exec(ctx, sandbox.Argv("cat", "/note"), "/", time.Minute)
		if err != nil {
			return err
		}
		step("fork %s (%.12s) reads:\n%s", forks[i].AgentID, f.InstanceID(), indent(res.Stdout()))
	}
	return nil
}

// state is the container's state as docker reports it.
func state(ctx context.Context, dockerPath, id string) string {
	out, err := exec.CommandContext(ctx, dockerPath, "inspect", "-f", "{{.State.Status}}", id).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
