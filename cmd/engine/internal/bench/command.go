package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/images"
)

// verb is "engine bench": every operation measured against the local Docker daemon.
type verb struct {
	image, dockerPath, only           string
	reps, parallel, pool              int
	asJSON, trace, scale, execChannel bool
	sizes                             string
	idle                              time.Duration
	cluster                           bool          // cluster.go
	paused                            int           // sleep.go
	pausedWindow                      time.Duration // sleep.go
}

// Command is "engine bench": it parses args (the flags after the verb) and runs the rows
// they ask for, printing each as it is measured. A bad flag fails before anything runs; -h
// prints the flags and returns [flag.ErrHelp].
func Command(ctx context.Context, args []string) error {
	v := &verb{}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *verb) parse(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&v.image, "image", images.BusyboxTag, "workload image (needs sh, true, echo, rm); built when it is the default and missing")
	fs.IntVar(&v.reps, "reps", 20, "timed repetitions of each row, after one warm-up")
	fs.BoolVar(&v.asJSON, "json", false, "print one JSON line per row instead of a table")
	fs.StringVar(&v.dockerPath, "docker", "docker", "the Docker CLI binary")
	fs.BoolVar(&v.trace, "trace", false, "instead of the rows, trace --reps cold acquires: every engine call's start and duration")
	fs.BoolVar(&v.scale, "scale", false, "instead of the rows, hold --sizes live sandboxes in turn and measure how the costs grow (not for CI)")
	fs.StringVar(&v.sizes, "sizes", "1,100,400", "with --scale: comma-separated, ascending counts of live sandboxes")
	fs.IntVar(&v.parallel, "parallel", 4, "with --scale: acquires at once while filling")
	fs.DurationVar(&v.idle, "idle", 5*time.Second, "with --scale: the idle actor timeout, waited out to measure passivated sandboxes")
	fs.BoolVar(&v.execChannel, "exec-channel", false, "give closed sandboxes the exec channel's supervisor: commands skip docker exec (docs/architecture.md)")
	fs.IntVar(&v.pool, "warm-pool", 0, "keep a warm pool of this many sandboxes of --image, and measure time_to_first_command with it warm and cold (group pool)")
	fs.StringVar(&v.only, "only", "", "comma-separated groups of rows to run: "+strings.Join(Groups(), ", "))
	fs.BoolVar(&v.cluster, "cluster", false, "instead of the rows, run three engines on a three-server NATS cluster in this process and measure snapshot_100mib, restore_other_engine_50mib and fork_8 over it")
	fs.IntVar(&v.paused, "paused", 0, "instead of the rows, hold this many sandboxes, pause them all, and measure the CPU time they use awake and paused and the memory they keep (not for CI)")
	fs.DurationVar(&v.pausedWindow, "paused-window", 30*time.Second, "with --paused: how long the CPU time is watched, awake and then paused")
	if err := settings.ParseFlags(fs, args); err != nil {
		return err
	}
	if v.reps < 1 {
		return fmt.Errorf("--reps must be at least 1")
	}
	if v.pool < 0 {
		return fmt.Errorf("--warm-pool must be at least 0")
	}
	if v.pool > 0 && v.only == "" {
		v.only = "pool" // the other groups' cold rows would take pool members
	}
	return nil
}

// run builds the default image when it is missing, then runs the rows and prints each.
func (v *verb) run(ctx context.Context) error {
	if v.image == images.BusyboxTag {
		if err := images.EnsureBusybox(ctx, v.dockerPath, v.image); err != nil {
			return err
		}
	}
	planeOpt, err := settings.FilePlane()
	if err != nil {
		return err
	}
	cfg := docker.Config{DockerPath: v.dockerPath}
	eng, err := docker.NewEngine(cfg)
	if err != nil {
		return err
	}
	var driver docker.Driver = eng
	var tracer *Tracer
	if v.trace || v.scale {
		tracer = NewTracer(driver)
		driver = tracer
	}
	store, closeStore, err := v.snapshotStore(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	opts, err := v.backendOptions(ctx, driver, planeOpt, actors.WithSnapshotStore(store))
	if err != nil {
		return err
	}
	b, err := actors.Create(ctx, cfg, opts...)
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	bcfg := Config{Image: v.image, Reps: v.reps, DockerPath: v.dockerPath, PoolSize: v.pool}
	if v.cluster {
		return Cluster(ctx, ClusterConfig{Config: bcfg, NewBackend: func(ctx context.Context, more ...actors.Option) (*actors.Backend, error) {
			return actors.Create(ctx, cfg, append(slices.Clone(opts), more...)...)
		}}, v.printer())
	}
	if v.paused > 0 {
		return v.runPaused(ctx, b, bcfg)
	}
	if v.scale {
		return v.runScale(ctx, b, bcfg, tracer)
	}
	if tracer != nil {
		return TraceCold(ctx, b, tracer, bcfg, os.Stdout)
	}
	plane, why := b.FilePlane(ctx)
	planeNote := "file plane: " + string(plane)
	if why != nil {
		planeNote += " (" + why.Error() + ")"
	}
	var table *rowTable
	if v.asJSON {
		line, _ := json.Marshal(map[string]string{"file_plane": string(plane), "note": planeNote})
		fmt.Println(string(line))
	} else {
		fmt.Println("# " + planeNote)
		table = newRowTable(os.Stdout)
	}
	report := func(r Row) {
		if v.asJSON {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			return
		}
		table.add(r)
	}
	var groups []string
	if v.only != "" {
		groups = strings.Split(v.only, ",")
	}
	bcfg.Groups = groups
	return Run(ctx, b, bcfg, report)
}

// rowTable prints rows as they come under a header: each number right-aligned in its column,
// and a row's note, when it has one, after the p95 column and two spaces.
type rowTable struct{ tw *tabwriter.Writer }

// noteGap separates the p95 column from the note: the columns are right-aligned, so without
// it a note would begin on the last digit of p95.
const noteGap = "  "

func newRowTable(w io.Writer) *rowTable {
	t := &rowTable{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	fmt.Fprintln(t.tw, "op\tn\tmin_ms\tmedian_ms\tp95_ms\t")
	return t
}

// add prints r and flushes it, so that a long run shows each row when it is measured.
func (t *rowTable) add(r Row) {
	note := ""
	if r.Note != "" {
		note = noteGap + r.Note
	}
	fmt.Fprintf(t.tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\n", r.Op, r.N, r.MinMS, r.MedianMS, r.P95MS, note)
	_ = t.tw.Flush()
}

// runScale runs `engine bench --scale` and prints its rows.
func (v *verb) runScale(ctx context.Context, b *actors.Backend, cfg Config, tracer *Tracer) error {
	var sizes []int
	for _, f := range strings.Split(v.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return fmt.Errorf("--sizes wants ascending positive counts, got %q", v.sizes)
		}
		sizes = append(sizes, n)
	}
	if !v.asJSON {
		fmt.Printf("%5s  %-26s %9s %-4s %8s  %s\n", "live", "op", "value", "unit", "p95", "note")
	}
	return Scale(ctx, b, ScaleConfig{Config: cfg, Sizes: sizes, Parallel: v.parallel, Idle: v.idle, Tracer: tracer}, func(r ScaleRow) {
		if v.asJSON {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			return
		}
		fmt.Printf("%5d  %-26s %9.1f %-4s %8.1f  %s\n", r.Live, r.Op, r.Value, r.Unit, r.P95, r.Note)
	})
}

// runPaused runs `engine bench --paused` and prints its rows.
func (v *verb) runPaused(ctx context.Context, b *actors.Backend, cfg Config) error {
	return Paused(ctx, b, PausedConfig{Config: cfg, N: v.paused, Parallel: v.parallel, Window: v.pausedWindow}, func(r PausedRow) {
		if v.asJSON {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			return
		}
		fmt.Printf("%-18s %10.1f %-4s  %s\n", r.Op, r.Value, r.Unit, r.Note)
	})
}

// snapshotStore is the store the snapshot rows use: a temporary directory, removed after.
func (v *verb) snapshotStore(context.Context) (actors.SnapshotStore, func(), error) {
	dir, err := os.MkdirTemp("", "maf-sandbox-bench-snapshots-")
	if err != nil {
		return nil, nil, err
	}
	store, err := actors.NewSnapshotDir(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return store, func() { os.RemoveAll(dir) }, nil
}

// backendOptions are the options of the bench's backends.
func (v *verb) backendOptions(ctx context.Context, driver docker.Driver, more ...actors.Option) ([]actors.Option, error) {
	opts := append([]actors.Option{actors.WithEngine(driver), actors.WithLogger(zap.NewNop())}, more...)
	if v.scale {
		opts = append(opts, actors.WithIdleActorTimeout(v.idle))
	}
	if v.execChannel {
		execd, err := images.ExecSupervisor(ctx, v.dockerPath)
		if err != nil {
			return nil, fmt.Errorf("exec channel: %w", err)
		}
		opts = append(opts, actors.WithExecChannel(execd))
	}
	if v.pool > 0 {
		opts = append(opts, actors.WithWarmPool(v.image, v.pool))
	}
	return opts, nil
}

// printer prints each row as it is measured: a JSON line, or a line of the table.
func (v *verb) printer() func(Row) {
	var table *rowTable
	if !v.asJSON {
		table = newRowTable(os.Stdout)
	}
	return func(r Row) {
		if v.asJSON {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			return
		}
		table.add(r)
	}
}
