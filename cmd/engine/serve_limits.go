package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mafsandbox/engine/telemetry"
)

// limitFlags are serve's bounds on what callers can take of the engine: the metric series
// their strings can make (docs/operations.md, "Settings" and "Metrics").
type limitFlags struct {
	labelCap int
	kinds    string
	envErr   error // a bad number in the environment, returned by check
}

func (f *limitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kinds, "metrics-kinds", envOr("MAF_SANDBOX_METRICS_KINDS", ""),
		"comma-separated sandbox kinds that always have metric series of their own (env MAF_SANDBOX_METRICS_KINDS)")
	fs.IntVar(&f.labelCap, "metrics-label-cap", f.envInt("MAF_SANDBOX_METRICS_LABEL_CAP", telemetry.DefaultLabelCap),
		"how many other kinds, and how many scopes, get metric series of their own in order of first use; the rest are counted as \"other\" (env MAF_SANDBOX_METRICS_LABEL_CAP)")
}

// envInt is the integer in the environment variable name, else def; a value that is not one
// is kept for check.
func (f *limitFlags) envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		if f.envErr == nil {
			f.envErr = fmt.Errorf("%s=%q is not an integer", name, v)
		}
		return def
	}
	return n
}

// check refuses what a flag or the environment gave out of range.
func (f *limitFlags) check() error {
	switch {
	case f.envErr != nil:
		return f.envErr
	case f.labelCap < 0:
		return fmt.Errorf("--metrics-label-cap %d: must not be negative", f.labelCap)
	}
	return nil
}

// metricsOptions bound the metrics' caller-chosen labels.
func (f *limitFlags) metricsOptions() []telemetry.MetricsOpt {
	var kinds []string
	for _, k := range strings.Split(f.kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds = append(kinds, k)
		}
	}
	return []telemetry.MetricsOpt{telemetry.WithKinds(kinds...), telemetry.WithLabelCap(f.labelCap)}
}
