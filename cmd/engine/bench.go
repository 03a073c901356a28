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

func benchCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	image := fs.String("image", images.BusyboxTag, "workload image (needs sh, true, echo, rm); built when it is the default and missing")
	reps := fs.Int("reps", 20, "timed repetitions of each row, after one warm-up")
	asJSON := fs.Bool("json", false, "print one JSON line per row instead of a table")
	dockerPath := fs.String("docker", "docker", "the Docker CLI binary")
	driver := fs.String("driver", "", "how the engine drives the Docker daemon: cli (the docker CLI) or api (its HTTP API); empty: the default")
	only := fs.String("only", "", "comma-separated groups of rows to run: "+strings.Join(bench.Groups(), ", "))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reps < 1 {
		return fmt.Errorf("--reps must be at least 1")
	}
	if *image == images.BusyboxTag {
		if err := images.EnsureBusybox(ctx, *dockerPath, *image); err != nil {
			return err
		}
	}
	b, err := actors.Create(ctx, docker.Config{DockerPath: *dockerPath, Driver: *driver}, actors.WithLogger(zap.NewNop()))
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if !*asJSON {
		fmt.Fprintln(tw, "op\tn\tmin_ms\tmedian_ms\tp95_ms\t")
	}
	report := func(r bench.Row) {
		if *asJSON {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\n", r.Op, r.N, r.MinMS, r.MedianMS, r.P95MS, r.Note)
		tw.Flush()
	}
	var groups []string
	if *only != "" {
		groups = strings.Split(*only, ",")
	}
	return bench.Run(ctx, b, bench.Config{Image: *image, Reps: *reps, DockerPath: *dockerPath, Groups: groups}, report)
}
