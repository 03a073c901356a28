package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/sandbox"
)

// sleepRows is the group "sleep": exec_after_wake, the first `exec true` on a sandbox the
// engine paused (the wake, docker unpause, is part of it), beside exec_argv_true on the same
// sandbox awake, so the two are measured under the same load.
func (r *runner) sleepRows(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	sb, err := r.b.Acquire(ctx, r.key("sleep"), files)
	if err != nil {
		return err
	}
	exec := func() error {
		res, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr())
		}
		return err
	}
	awake, err := r.time(ctx, "exec_argv_true_awake", nil, exec)
	if err != nil {
		return err
	}
	awake.Note = "the same sandbox as exec_after_wake, never paused"
	report(awake)
	pause := func() error { return sb.(*actors.Sandbox).Pause(ctx) }
	row, err := r.time(ctx, "exec_after_wake", pause, exec)
	if err != nil {
		return err
	}
	row.Note = fmt.Sprintf("paused before each; the wake (docker unpause) included: +%.1f ms over awake", row.MedianMS-awake.MedianMS)
	report(row)
	row, err = r.time(ctx, "pause", exec, pause) // woken by an exec before each
	if err != nil {
		return err
	}
	row.Note = "docker pause of an idle sandbox (an operator's pause; an idle one is the same call)"
	report(row)
	return nil
}

// PausedConfig says what `engine bench --paused` holds.
type PausedConfig struct {
	Config
	N        int           // sandboxes held paused
	Parallel int           // acquires at once while filling
	Window   time.Duration // how long their CPU time is watched, awake then paused
}

// PausedRow is one figure of `engine bench --paused`.
type PausedRow struct {
	Op    string  `json:"op"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
}

// Paused holds cfg.N closed sandboxes, measures the CPU time they use idle and awake over
// cfg.Window, pauses them all, measures it again over the same window, and states the memory
// they keep paused: their cgroups' memory (the guest's processes and page cache) and the
// containerd shims that hold each container (outside the cgroup). It reads the cgroup v1
// hierarchy the daemon makes (cgroupfs driver, /sys/fs/cgroup/<controller>/docker/<id>); a
// figure it cannot read is reported as such. Every sandbox is disposed before it returns.
func Paused(ctx context.Context, b *actors.Backend, cfg PausedConfig, report func(PausedRow)) error {
	r := &runner{b: b, cfg: cfg.Config, scope: "bench-" + randomHex()}
	defer r.b.DisposeScope(context.WithoutCancel(ctx), r.scope, "bench")
	files, _, err := specs(cfg.Config)
	if err != nil {
		return err
	}
	began := time.Now()
	keys, err := r.fill(ctx, files, cfg.N, max(1, cfg.Parallel))
	if err != nil {
		return err
	}
	report(PausedRow{Op: "fill", Value: time.Since(began).Seconds(), Unit: "s", Note: fmt.Sprintf("%d sandboxes acquired", cfg.N)})
	sbs := make([]sandbox.Sandbox, len(keys))
	for i, k := range keys {
		if sbs[i], err = r.b.Acquire(ctx, k, files); err != nil {
			return err
		}
	}
	ids := make([]string, len(sbs))
	for i, sb := range sbs {
		ids[i] = sb.InstanceID()
	}
	awake, err := cpuOver(ctx, ids, cfg.Window)
	if err != nil {
		report(PausedRow{Op: "cpu_awake", Unit: "ms", Note: "unmeasured: " + err.Error()})
	} else {
		report(PausedRow{Op: "cpu_awake", Value: awake, Unit: "ms", Note: fmt.Sprintf("all %d sandboxes' CPU time over %s, idle and running", cfg.N, cfg.Window)})
	}
	began = time.Now()
	if err := pauseAll(ctx, sbs, max(1, cfg.Parallel)); err != nil {
		return err
	}
	report(PausedRow{Op: "pause_all", Value: time.Since(began).Seconds(), Unit: "s"})
	asleep, err := cpuOver(ctx, ids, cfg.Window)
	if err != nil {
		report(PausedRow{Op: "cpu_paused", Unit: "ms", Note: "unmeasured: " + err.Error()})
	} else {
		report(PausedRow{Op: "cpu_paused", Value: asleep, Unit: "ms", Note: fmt.Sprintf("all %d sandboxes' CPU time over %s, paused", cfg.N, cfg.Window)})
	}
	mem, rss, err := cgroupMemory(ids)
	if err != nil {
		report(PausedRow{Op: "memory_paused", Unit: "MiB", Note: "unmeasured: " + err.Error()})
	} else {
		report(PausedRow{Op: "memory_paused", Value: mb(mem), Unit: "MiB", Note: fmt.Sprintf("the cgroups' memory.usage_in_bytes, all %d (rss %.1f MiB); %.2f MiB each", cfg.N, mb(rss), mb(mem)/float64(cfg.N))})
	}
	shims, n := shimRSS(ids)
	report(PausedRow{Op: "shim_rss_paused", Value: mb(shims), Unit: "MiB", Note: fmt.Sprintf("the containerd shims of %d of them (outside the cgroups); %.2f MiB each", n, mb(shims)/float64(max(n, 1)))})
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func pauseAll(ctx context.Context, sbs []sandbox.Sandbox, parallel int) error {
	sem := make(chan struct{}, parallel)
	errs := make([]error, len(sbs))
	var wg sync.WaitGroup
	for i, sb := range sbs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = sb.(*actors.Sandbox).Pause(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// cpuOver is the CPU time, in ms, the containers' cgroups used over window.
func cpuOver(ctx context.Context, ids []string, window time.Duration) (float64, error) {
	before, err := cpuUsage(ids)
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	after, err := cpuUsage(ids)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / 1e6, nil
}

func cpuUsage(ids []string) (int64, error) {
	var sum int64
	for _, id := range ids {
		v, err := readInt(filepath.Join("/sys/fs/cgroup/cpuacct/docker", id, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func cgroupMemory(ids []string) (usage, rss int64, err error) {
	for _, id := range ids {
		dir := filepath.Join("/sys/fs/cgroup/memory/docker", id)
		v, err := readInt(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return 0, 0, err
		}
		usage += v
		stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return 0, 0, err
		}
		for _, line := range strings.Split(string(stat), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "rss" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				rss += n
			}
		}
	}
	return usage, rss, nil
}

// shimRSS sums the resident memory of the containerd shims whose command line names one of
// the containers, and says how many it found.
func shimRSS(ids []string) (int64, int) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	procs, _ := os.ReadDir("/proc")
	var sum int64
	n := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "containerd-shim") {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		for i, a := range args {
			if a == "-id" && i+1 < len(args) && want[args[i+1]] {
				sum += statusRSS(p.Name())
				n++
			}
		}
	}
	return sum, n
}

func statusRSS(pid string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
