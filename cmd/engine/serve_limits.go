package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mafsandbox/engine/service"
	"github.com/mafsandbox/engine/telemetry"
)

// limitFlags are serve's bounds on what callers can take of the engine: calls in flight, for
// the engine and for each tenant's account, and the metric series their strings can make
// (docs/operations.md, "Settings" and "Metrics").
type limitFlags struct {
	maxInFlight, perAccount, labelCap int
	kinds                             string
	envNumbers
}

func (f *limitFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.maxInFlight, "max-in-flight", f.envInt("MAF_SANDBOX_MAX_IN_FLIGHT", service.DefaultMaxInFlight),
		"calls the engine handles at once; more are answered engine_unavailable; health calls have a bound of their own (env MAF_SANDBOX_MAX_IN_FLIGHT)")
	fs.IntVar(&f.perAccount, "max-in-flight-per-account", f.envInt("MAF_SANDBOX_MAX_IN_FLIGHT_PER_ACCOUNT", 0),
		"with --tenancy, calls one NATS account's callers have in flight at once; more are answered busy, to that account alone; 0: a quarter of --max-in-flight (env MAF_SANDBOX_MAX_IN_FLIGHT_PER_ACCOUNT)")
	fs.StringVar(&f.kinds, "metrics-kinds", envOr("MAF_SANDBOX_METRICS_KINDS", ""),
		"comma-separated sandbox kinds that always have metric series of their own (env MAF_SANDBOX_METRICS_KINDS)")
	fs.IntVar(&f.labelCap, "metrics-label-cap", f.envInt("MAF_SANDBOX_METRICS_LABEL_CAP", telemetry.DefaultLabelCap),
		"how many other kinds, and how many scopes, get metric series of their own in order of first use; the rest are counted as \"other\" (env MAF_SANDBOX_METRICS_LABEL_CAP)")
}

// envNumbers reads flags' integer defaults from the environment; the first value that is not
// an integer is kept, and refused when the flags are checked.
type envNumbers struct{ envErr error }

// envInt is the integer in the environment variable name, else def; a value that is not one
// is kept in envErr.
func (f *envNumbers) envInt(name string, def int) int {
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
	case f.maxInFlight <= 0:
		return fmt.Errorf("--max-in-flight %d: must be positive", f.maxInFlight)
	case f.perAccount < 0:
		return fmt.Errorf("--max-in-flight-per-account %d: must not be negative", f.perAccount)
	case f.labelCap < 0:
		return fmt.Errorf("--metrics-label-cap %d: must not be negative", f.labelCap)
	}
	return nil
}

// serviceOptions are the service's bounds on calls in flight.
func (f *limitFlags) serviceOptions() []service.Option {
	opts := []service.Option{service.WithMaxInFlight(f.maxInFlight)}
	if f.perAccount > 0 {
		opts = append(opts, service.WithMaxInFlightPerAccount(f.perAccount))
	}
	return opts
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
