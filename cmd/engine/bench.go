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
	asJSON                          bool
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
	planeOpt, err := filePlaneOption()
	if err != nil {
		return err
	}
	b, err := actors.Create(ctx, docker.Config{DockerPath: v.dockerPath, Driver: v.driver}, actors.WithLogger(zap.NewNop()), planeOpt)
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	plane, why := b.FilePlane(ctx)
	planeNote := "file plane: " + string(plane)
	if why != nil {
		planeNote += " (" + why.Error() + ")"
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if v.asJSON {
		line, _ := json.Marshal(map[string]string{"file_plane": string(plane), "note": planeNote})
		fmt.Println(string(line))
	} else {
		fmt.Println("# " + planeNote)
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
	return bench.Run(ctx, b, bench.Config{Image: v.image, Reps: v.reps, DockerPath: v.dockerPath, Groups: groups}, report)
}
