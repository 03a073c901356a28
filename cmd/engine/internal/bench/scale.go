package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/sandbox"
)

// ScaleConfig says what `engine bench --scale` holds and measures.
type ScaleConfig struct {
	Config
	Sizes    []int         // how many live sandboxes to hold at each step, ascending
	Parallel int           // acquires at once while filling
	Idle     time.Duration // the backend's idle actor timeout: waited out to measure passivated sandboxes
	Tracer   *Tracer       // when set (b's engine), one warm and one cold acquire per size are split into daemon and engine time
}

// ScaleRow is one figure at one size.
type ScaleRow struct {
	Live  int     `json:"live"`
	Op    string  `json:"op"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	P95   float64 `json:"p95,omitempty"`
	Note  string  `json:"note,omitempty"`
}

// Scale holds cfg.Sizes live closed sandboxes in turn on b (built with cfg.Idle as its idle
// actor timeout) and, at each size, measures the engine's memory per live and per passivated
// sandbox, then a cold acquire, a warm acquire, a stat and a dispose of one more, and the event
// watch's lag. Every sandbox carries the bench's scope label and is disposed before Scale
// returns (or, if the process dies, by `engine reap` or a removal by that label).
func Scale(ctx context.Context, b *actors.Backend, cfg ScaleConfig, report func(ScaleRow)) error {
	r := &runner{b: b, cfg: cfg.Config, scope: "bench-" + randomHex()}
	defer r.b.DisposeScope(context.WithoutCancel(ctx), r.scope, "bench")
	files, _, err := specs(cfg.Config)
	if err != nil {
		return err
	}
	// Memory per sandbox is marginal: the growth since the previous size over the sandboxes
	// added, so the first acquire's one-time costs (pools, code paths) count only at size 1.
	prevLive, prevIdle := memNow(), memNow()
	var held []sandbox.Key
	var first sandbox.Sandbox
	for _, n := range cfg.Sizes {
		began := time.Now()
		added, err := r.fill(ctx, files, n-len(held), max(1, cfg.Parallel))
		if err != nil {
			return err
		}
		held = append(held, added...)
		report(ScaleRow{Live: len(held), Op: "fill", Value: ms(time.Since(began)), Unit: "ms", Note: fmt.Sprintf("%d acquired; load %s", len(added), loadAvg())})
		if first == nil {
			if first, err = b.Acquire(ctx, held[0], files); err != nil {
				return err
			}
			if err := first.WriteFile(ctx, "scale.txt", []byte("x"), "."); err != nil {
				return err
			}
		}
		// Every held sandbox's actor is live now (touched within the idle timeout).
		for _, k := range held {
			if _, err := b.Acquire(ctx, k, files); err != nil {
				return err
			}
		}
		live := memNow()
		report(memRow(len(held), len(added), "mem_per_live", live, prevLive))
		if err := sleepCtx(ctx, cfg.Idle+cfg.Idle/2+2*time.Second); err != nil {
			return err
		}
		idle := memNow()
		report(memRow(len(held), len(added), "mem_per_passivated", idle, prevIdle))
		prevLive, prevIdle = live, idle
		b.TakeWatchLag()
		rows, err := r.scaleLatencies(ctx, files, held[0], first)
		if err != nil {
			return err
		}
		for _, row := range rows {
			report(ScaleRow{Live: len(held), Op: row.Op, Value: row.MedianMS, Unit: "ms", P95: row.P95MS})
		}
		if cfg.Tracer != nil {
			if err := r.split(ctx, cfg.Tracer, files, held[0], len(held), report); err != nil {
				return err
			}
		}
		lag := b.TakeWatchLag()
		report(ScaleRow{Live: len(held), Op: "watch_lag_max", Value: ms(lag.Max), Unit: "ms",
			Note: fmt.Sprintf("%d events, mean %.1f ms; load %s", lag.Events, ms(lag.Mean), loadAvg())})
	}
	return nil
}

// fill acquires n more sandboxes, parallel at a time.
func (r *runner) fill(ctx context.Context, spec sandbox.Spec, n, parallel int) ([]sandbox.Key, error) {
	keys := make([]sandbox.Key, n)
	for i := range keys {
		keys[i] = r.key("live")
	}
	sem := make(chan struct{}, parallel)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = r.b.Acquire(ctx, k, spec)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// scaleLatencies times one more cold acquire, a warm acquire and a stat of a held sandbox, and
// a dispose of one more. The cold acquires' sandboxes are disposed untimed.
func (r *runner) scaleLatencies(ctx context.Context, files sandbox.Spec, warm sandbox.Key, sb sandbox.Sandbox) ([]Row, error) {
	var key sandbox.Key
	var extra []sandbox.Key
	defer func() {
		for _, k := range extra {
			r.b.Dispose(context.WithoutCancel(ctx), k, sandbox.DisposeOptions{})
		}
	}()
	var rows []Row
	steps := []struct {
		name  string
		setup func() error
		op    func() error
	}{
		{"acquire_cold", func() error { key = r.key("cold"); extra = append(extra, key); return nil },
			func() error { _, err := r.b.Acquire(ctx, key, files); return err }},
		{"acquire_warm_running", nil, func() error { _, err := r.b.Acquire(ctx, warm, files); return err }},
		{"stat_file_existing", nil, func() error { return expectStat(sb.StatFile(ctx, "scale.txt", ".")) }},
		{"dispose", func() error {
			key = r.key("dispose")
			_, err := r.b.Acquire(ctx, key, files)
			return err
		}, func() error {
			if f := r.b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
				return f
			}
			return nil
		}},
	}
	for _, s := range steps {
		row, err := r.time(ctx, s.name, s.setup, s.op)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// mem is the process's resident set and the Go heap in use, after a collection.
type mem struct{ rss, heap uint64 }

func memNow() mem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{rss: vmRSS(), heap: ms.HeapInuse}
}

func memRow(live, added int, op string, now, prev mem) ScaleRow {
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(max(1, added)) / 1024 }
	return ScaleRow{Live: live, Op: op + "_rss", Value: per(now.rss, prev.rss), Unit: "KiB",
		Note: fmt.Sprintf("Go heap in use %.1f KiB per sandbox; RSS %.1f MiB", per(now.heap, prev.heap), float64(now.rss)/(1<<20))}
}

// vmRSS reads VmRSS from /proc/self/status, in bytes; 0 where there is none.
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// split traces one warm and one cold acquire and a dispose, and reports how much of each was
// spent waiting on the daemon and how much in the engine (no engine call in flight), with the
// daemon's time per kind of call: what tells a daemon that slows with its container count
// from an engine that does.
func (r *runner) split(ctx context.Context, tr *Tracer, files sandbox.Spec, warm sandbox.Key, live int, report func(ScaleRow)) error {
	cold := r.key("split")
	defer r.b.Dispose(context.WithoutCancel(ctx), cold, sandbox.DisposeOptions{})
	acquire := func(k sandbox.Key) func() error {
		return func() error { _, err := r.b.Acquire(ctx, k, files); return err }
	}
	dispose := func() error {
		if f := r.b.Dispose(ctx, cold, sandbox.DisposeOptions{}); f != nil {
			return f
		}
		return nil
	}
	for _, c := range []struct {
		op string
		do func() error
	}{{"acquire_warm_split", acquire(warm)}, {"acquire_cold_split", acquire(cold)}, {"dispose_split", dispose}} {
		tr.Mark()
		began := time.Now()
		if err := c.do(); err != nil {
			return err
		}
		total := time.Since(began)
		calls := tr.Calls()
		busy := Busy(calls)
		report(ScaleRow{Live: live, Op: c.op, Value: ms(total - busy), Unit: "ms",
			Note: fmt.Sprintf("engine-side, of %.1f ms in all; the daemon %.1f ms over %d calls (%s)", ms(total), ms(busy), len(calls), perOp(calls))})
	}
	return nil
}

// perOp sums the calls' durations by kind of call, in the order each kind first appears.
func perOp(calls []Call) string {
	var order []string
	sum := map[string]time.Duration{}
	for _, c := range calls {
		if _, ok := sum[c.Op]; !ok {
			order = append(order, c.Op)
		}
		sum[c.Op] += c.Took
	}
	parts := make([]string, len(order))
	for i, op := range order {
		parts[i] = fmt.Sprintf("%s %.1f", op, ms(sum[op]))
	}
	return strings.Join(parts, ", ")
}
