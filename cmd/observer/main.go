// Command observer is the fingerprint observer (docker-backend §12.5): a static program in a
// FROM scratch image that the engine runs in a container of its own, joined to a workload's
// PID namespace, to measure the workload through /proc (package internal/observation). It
// writes one JSON report on stdout and exits 0, or writes the reason on stderr and exits with
// the code of its class: [observation.ExitLimit] for an exceeded bound,
// [observation.ExitChanged] for a workload that changed while it read,
// [observation.ExitUnobservable] for a writable mount it refuses, 1 for anything else
// unreadable, 2 for a usage error.
//
//	observer measure [-max-bytes N] [-max-entries N] [-max-root-entries N]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/mafsandbox/engine/internal/observation"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "observer: %v\n", err)
		os.Exit(observation.ExitCode(err))
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "measure" {
		return fmt.Errorf("%w: want the verb measure", observation.ErrUsage)
	}
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	maxBytes := fs.Int64("max-bytes", observation.DefaultMaxBytes, "regular-file bytes to hash at most")
	maxEntries := fs.Int("max-entries", observation.DefaultMaxEntries, "entries of the measured mounts to record at most")
	maxRoot := fs.Int("max-root-entries", observation.DefaultMaxRootEntries, "entries of the root filesystem to record at most")
	proc := fs.String("proc", "/proc", "the procfs of the workload's PID namespace")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", observation.ErrUsage, err)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", observation.ErrUsage, fs.Args())
	}
	r, err := observation.Measure(*proc, os.Getpid(), observation.Limits{MaxBytes: *maxBytes, MaxEntries: *maxEntries, MaxRootEntries: *maxRoot})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}
