package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/bench"
	"github.com/mafsandbox/engine/internal/images"
)

// benchVerb is "engine bench": every operation measured against the local Docker daemon.
type benchVerb struct {
	image, dockerPath, driver, only string
	reps                            int
	asJSON, trace                   bool
}

// benchCmd parses args into a [benchVerb] and runs it.
func benchCmd(ctx context.Context, args []string) error {
	v := &benchVerb{}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *benchVerb) parse(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&v.image, "image", images.BusyboxTag, "workload image (needs sh, true, echo, rm); built when it is the default and missing")
	fs.IntVar(&v.reps, "reps", 20, "timed repetitions of each row, after one warm-up")
	fs.BoolVar(&v.asJSON, "json", false, "print one JSON line per row instead of a table")
	fs.StringVar(&v.dockerPath, "docker", "docker", "the Docker CLI binary")
	fs.StringVar(&v.driver, "driver", "", "how the engine drives the Docker daemon: cli (the docker CLI) or api (its HTTP API); empty: the default")
	fs.BoolVar(&v.trace, "trace", false, "instead of the rows, trace --reps cold acquires: every engine call's start and duration")
	fs.StringVar(&v.only, "only", "", "comma-separated groups of rows to run: "+strings.Join(bench.Groups(), ", "))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if v.reps < 1 {
		return fmt.Errorf("--reps must be at least 1")
	}
	return nil
}

// run builds the default image when it is missing, then runs the rows and prints each.
func (v *benchVerb) run(ctx context.Context) error {
	if v.image == images.BusyboxTag {
		if err := images.EnsureBusybox(ctx, v.dockerPath, v.image); err != nil {
			return err
		}
	}
	cfg := docker.Config{DockerPath: v.dockerPath, Driver: v.driver}
	driver, err := docker.NewEngine(cfg)
	if err != nil {
		return err
	}
	var tracer *bench.Tracer
	if v.trace {
		tracer = bench.NewTracer(driver)
		driver = tracer
	}
	b, err := actors.Create(ctx, cfg, actors.WithEngine(driver), actors.WithLogger(zap.NewNop()))
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	bcfg := bench.Config{Image: v.image, Reps: v.reps, DockerPath: v.dockerPath}
	if tracer != nil {
		return bench.TraceCold(ctx, b, tracer, bcfg, os.Stdout)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if !v.asJSON {
		fmt.Fprintln(tw, "op\tn\tmin_ms\tmedian_ms\tp95_ms\t")
	}
	report := func(r bench.Row) {
		if v.asJSON {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\n", r.Op, r.N, r.MinMS, r.MedianMS, r.P95MS, r.Note)
		tw.Flush()
	}
	var groups []string
	if v.only != "" {
		groups = strings.Split(v.only, ",")
	}
	bcfg.Groups = groups
	return bench.Run(ctx, b, bcfg, report)
}
