package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// Row is one measured operation.
type Row struct {
	Op       string  `json:"op"`
	N        int     `json:"n"`
	MinMS    float64 `json:"min_ms"`
	MedianMS float64 `json:"median_ms"`
	P95MS    float64 `json:"p95_ms"`
	Note     string  `json:"note,omitempty"`
}

// Config says what to measure against.
type Config struct {
	Image      string // a busybox-like image: sh, true, echo, dd, rm
	Reps       int    // timed repetitions after one warm-up
	DockerPath string // for the bare `docker exec` baseline
	PoolSize   int    // the backend's warm pool of Image (engine bench --warm-pool); 0: none
	Labels     map[string]string
	Groups     []string // run only these groups of rows (lifecycle, exec, files, concurrent, loop); empty: all
}

// Groups lists the groups of rows, in the order they run.
func Groups() []string {
	return []string{"lifecycle", "exec", "files", "concurrent", "loop", "pool", "process", "sleep", "snapshot"}
}

// Run measures every row, reporting each as soon as it is done. Everything it creates is
// disposed before it returns.
func Run(ctx context.Context, b *actors.Backend, cfg Config, report func(Row)) error {
	r := &runner{b: b, cfg: cfg, scope: "bench-" + randomHex()}
	defer r.b.DisposeScope(context.WithoutCancel(ctx), r.scope, "bench")
	files, runtimeOnly, err := specs(cfg)
	if err != nil {
		return err
	}
	steps := []func(context.Context, sandbox.Spec, sandbox.Spec, func(Row)) error{
		r.lifecycle, r.execs, r.files, r.concurrent, r.guestLoop, r.firstCommand, // pool.go
		r.processes,    // process.go
		r.sleepRows,    // sleep.go
		r.snapshotRows, // snapshot.go
	}
	for i, step := range steps {
		if len(cfg.Groups) > 0 && !slices.Contains(cfg.Groups, Groups()[i]) {
			continue
		}
		if err := step(ctx, files, runtimeOnly, report); err != nil {
			return err
		}
	}
	return nil
}

// specs are the two workloads every row uses: one that needs the whole file plane, and one
// that needs only the runtime.
func specs(cfg Config) (files, runtimeOnly sandbox.Spec, err error) {
	files, err = sandbox.NewSpec("bench", sandbox.WithImage(cfg.Image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
	if err == nil {
		runtimeOnly, err = sandbox.NewSpec("bench-runtime", sandbox.WithImage(cfg.Image), sandbox.WithRequires())
	}
	return files, runtimeOnly, err
}

type runner struct {
	b     *actors.Backend
	cfg   Config
	scope string
	n     int
}

func (r *runner) key(agent string) sandbox.Key {
	r.n++
	return sandbox.Key{Scope: r.scope, ThreadID: "bench", AgentID: fmt.Sprintf("%s-%d", agent, r.n)}
}

// time runs op reps+1 times (the first is a warm-up) and summarises the timed runs; setup
// runs before each, untimed.
func (r *runner) time(ctx context.Context, name string, setup func() error, op func() error) (Row, error) {
	var ds []time.Duration
	for i := 0; i <= r.cfg.Reps; i++ {
		if setup != nil {
			if err := setup(); err != nil {
				return Row{}, fmt.Errorf("%s setup: %w", name, err)
			}
		}
		start := time.Now()
		if err := op(); err != nil {
			return Row{}, fmt.Errorf("%s: %w", name, err)
		}
		if i > 0 {
			ds = append(ds, time.Since(start))
		}
		if ctx.Err() != nil {
			return Row{}, ctx.Err()
		}
	}
	return summarise(name, ds), nil
}

func summarise(name string, ds []time.Duration) Row {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p95 := ds[min(len(ds)-1, (len(ds)*95+99)/100-1)]
	return Row{Op: name, N: len(ds), MinMS: ms(ds[0]), MedianMS: ms(ds[len(ds)/2]), P95MS: ms(p95)}
}

func (r *runner) lifecycle(ctx context.Context, files, runtimeOnly sandbox.Spec, report func(Row)) error {
	var key sandbox.Key
	cold, base, err := r.coldAndBaseline(ctx, files)
	if err != nil {
		return err
	}
	report(cold)
	report(base)
	row, err := r.time(ctx, "dispose", func() error {
		key = r.key("dispose")
		_, err := r.b.Acquire(ctx, key, files)
		return err
	}, func() error {
		if f := r.b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			return f
		}
		return nil
	})
	if err != nil {
		return err
	}
	report(row)
	warm := r.key("warm")
	if _, err := r.b.Acquire(ctx, warm, files); err != nil {
		return err
	}
	row, err = r.time(ctx, "acquire_warm_running", nil, func() error { _, err := r.b.Acquire(ctx, warm, files); return err })
	if err != nil {
		return err
	}
	report(row)
	rt := r.key("runtime")
	if _, err := r.b.Acquire(ctx, rt, runtimeOnly); err != nil {
		return err
	}
	row, err = r.time(ctx, "acquire_warm_running_runtime_only", nil, func() error { _, err := r.b.Acquire(ctx, rt, runtimeOnly); return err })
	if err != nil {
		return err
	}
	report(row)
	var sb sandbox.Sandbox
	stopped := r.key("stopped")
	row, err = r.time(ctx, "acquire_restart_stopped", func() error {
		var err error
		if sb, err = r.b.Acquire(ctx, stopped, files); err != nil {
			return err
		}
		return r.docker(ctx, "kill", sb.InstanceID())
	}, func() error { _, err := r.b.Acquire(ctx, stopped, files); return err })
	if err != nil {
		return err
	}
	report(row)
	return nil
}

func (r *runner) docker(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, r.dockerPath(), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (r *runner) dockerPath() string {
	if r.cfg.DockerPath != "" {
		return r.cfg.DockerPath
	}
	return "docker"
}

func (r *runner) execs(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	sb, err := r.b.Acquire(ctx, r.key("exec"), files)
	if err != nil {
		return err
	}
	run := func(name string, cmd sandbox.Command) error {
		row, err := r.time(ctx, name, nil, func() error {
			res, err := sb.Exec(ctx, cmd, ".", time.Minute)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr())
			}
			return err
		})
		if err == nil {
			report(row)
		}
		return err
	}
	if err := run("exec_argv_true", sandbox.Argv("true")); err != nil {
		return err
	}
	if err := run("exec_shell_echo_hi", sandbox.Shell("echo hi")); err != nil {
		return err
	}
	row, err := r.time(ctx, "baseline_cli_exec_true", nil, func() error { return r.docker(ctx, "exec", sb.InstanceID(), "true") })
	if err != nil {
		return err
	}
	report(row)
	return nil
}

func (r *runner) files(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	sb, err := r.b.Acquire(ctx, r.key("files"), files)
	if err != nil {
		return err
	}
	kib, mib := make([]byte, 1024), make([]byte, 1<<20)
	_, _ = rand.Read(kib)
	_, _ = rand.Read(mib)
	steps := []struct {
		name  string
		setup func() error
		op    func() error
	}{
		{"write_file_1KiB", nil, func() error { return sb.WriteFile(ctx, "kib.bin", kib, ".") }},
		{"read_file_1KiB", nil, func() error { _, err := sb.ReadFile(ctx, "kib.bin", ".", 1<<20); return err }},
		{"stat_file_existing", nil, func() error { return expectStat(sb.StatFile(ctx, "kib.bin", ".")) }},
		{"stat_file_missing", nil, func() error {
			st, err := sb.StatFile(ctx, "missing.bin", ".")
			if err == nil && st != nil {
				err = fmt.Errorf("missing file stats as present")
			}
			return err
		}},
		{"remove_file", func() error { return sb.WriteFile(ctx, "gone.bin", kib, ".") }, func() error { return sb.Remove(ctx, "gone.bin", ".", false) }},
		{"write_file_1MiB", nil, func() error { return sb.WriteFile(ctx, "mib.bin", mib, ".") }},
		{"read_file_1MiB", nil, func() error { _, err := sb.ReadFile(ctx, "mib.bin", ".", 2<<20); return err }},
		{"stat_file_existing_next_to_1MiB", nil, func() error { return expectStat(sb.StatFile(ctx, "kib.bin", ".")) }},
	}
	for _, s := range steps {
		row, err := r.time(ctx, s.name, s.setup, s.op)
		if err != nil {
			return err
		}
		report(row)
	}
	return nil
}

func expectStat(st *sandbox.FileStat, err error) error {
	if err == nil && st == nil {
		err = fmt.Errorf("existing file stats as absent")
	}
	return err
}

// concurrent acquires 8 keys in parallel and runs 5 `exec true` in each, timing the whole.
func (r *runner) concurrent(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	var keys []sandbox.Key
	row, err := r.time(ctx, "concurrent_8x5_total", func() error {
		for _, k := range keys {
			r.b.Dispose(ctx, k, sandbox.DisposeOptions{})
		}
		keys = keys[:0]
		for range 8 {
			keys = append(keys, r.key("conc"))
		}
		return nil
	}, func() error {
		var wg sync.WaitGroup
		errs := make([]error, len(keys))
		for i, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := r.b.Acquire(ctx, k, files)
				for j := 0; err == nil && j < 5; j++ {
					_, err = sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	report(row)
	return nil
}

// guestLoop runs a CPU-bound shell loop of about 1.5 s alone and while the host stats a file
// every 0.2 s; the note gives the guest's share of wall clock under the poll.
func (r *runner) guestLoop(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	sb, err := r.b.Acquire(ctx, r.key("loop"), files)
	if err != nil {
		return err
	}
	if err := sb.WriteFile(ctx, "polled.txt", []byte("x"), "."); err != nil {
		return err
	}
	iters, err := calibrate(ctx, sb, 1500*time.Millisecond)
	if err != nil {
		return err
	}
	loop := sandbox.Shell(fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); done", iters))
	runLoop := func() error {
		_, err := sb.Exec(ctx, loop, ".", time.Minute)
		return err
	}
	alone, err := r.time(ctx, "guest_loop_no_poll", nil, runLoop)
	if err != nil {
		return err
	}
	report(alone)
	// The poller runs for the whole row; each rep times the guest's loop alone, so the row
	// says how fast the guest ran while being polled.
	var mu sync.Mutex
	var worst time.Duration
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				start := time.Now()
				_, _ = sb.StatFile(ctx, "polled.txt", ".")
				mu.Lock()
				worst = max(worst, time.Since(start))
				mu.Unlock()
			}
		}
	}()
	polled, err := r.time(ctx, "guest_loop_with_poll", nil, runLoop)
	close(stop)
	<-done
	if err != nil {
		return err
	}
	polled.Note = fmt.Sprintf("guest share %.0f%% of wall clock (median alone / median polled); slowest stat %.0f ms",
		100*alone.MedianMS/polled.MedianMS, float64(worst.Microseconds())/1000)
	report(polled)
	return nil
}

// calibrate finds a loop count that runs for about want.
func calibrate(ctx context.Context, sb sandbox.Sandbox, want time.Duration) (int, error) {
	n := 20000
	for range 6 {
		start := time.Now()
		if _, err := sb.Exec(ctx, sandbox.Shell(fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); done", n)), ".", time.Minute); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if took > want*8/10 && took < want*12/10 {
			break
		}
		n = int(float64(n) * float64(want) / float64(max(took, time.Millisecond)))
	}
	return n, nil
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// coldAndBaseline times acquire_cold and, interleaved with it rep by rep (so that both see
// the same load), the runtime's own floor under it: a raw create and start of the same image,
// with the same hardening, network and labels, through a driver of its own. The baseline's
// removal after each rep is untimed.
func (r *runner) coldAndBaseline(ctx context.Context, files sandbox.Spec) (cold, base Row, err error) {
	api, err := docker.NewEngine(docker.Config{DockerPath: r.dockerPath(), Labels: r.cfg.Labels})
	if err != nil {
		return Row{}, Row{}, err
	}
	var name string
	drop := func() {
		if name != "" {
			_, _ = api.Remove(context.WithoutCancel(ctx), name)
			name = ""
		}
	}
	defer drop()
	var labels []label.Label
	baseline := func() error {
		opts := append(docker.Config{}.WorkloadOpts(), docker.WithNetworkNone(), docker.WithLabels(labels...))
		id, err := api.Create(ctx, docker.NewCreateSpec(name, r.cfg.Image, opts...))
		if err != nil {
			return err
		}
		return api.Start(ctx, id)
	}
	var coldDs, baseDs []time.Duration
	var ratios []float64
	for i := 0; i <= r.cfg.Reps; i++ {
		drop()
		key := r.key("cold")
		bkey := r.key("baseline")
		name = docker.ContainerName(bkey, files.Kind, "")
		if labels, err = label.Workload(bkey, files.Kind, nil, actors.DefaultWorkDir); err != nil {
			return Row{}, Row{}, err
		}
		var c, b time.Duration
		timed := func(d *time.Duration, op func() error) error {
			start := time.Now()
			err := op()
			*d = time.Since(start)
			return err
		}
		acquire := func() error { _, err := r.b.Acquire(ctx, key, files); return err }
		first, second := func() error { return timed(&c, acquire) }, func() error { return timed(&b, baseline) }
		if i%2 == 1 {
			first, second = second, first // neither always runs on the other's heels
		}
		if err := first(); err != nil {
			return Row{}, Row{}, fmt.Errorf("acquire_cold / baseline: %w", err)
		}
		if err := second(); err != nil {
			return Row{}, Row{}, fmt.Errorf("acquire_cold / baseline: %w", err)
		}
		if i > 0 {
			coldDs, baseDs = append(coldDs, c), append(baseDs, b)
			ratios = append(ratios, float64(c)/float64(b))
		}
		if ctx.Err() != nil {
			return Row{}, Row{}, ctx.Err()
		}
	}
	cold, base = summarise("acquire_cold", coldDs), summarise("baseline_api_create_start", baseDs)
	slices.Sort(ratios)
	cold.Note = fmt.Sprintf("%.2fx baseline_api_create_start (median of per-rep ratios)", ratios[len(ratios)/2])
	base.Note = "raw create + start through the Engine API, interleaved with acquire_cold: its floor"
	return cold, base, nil
}
