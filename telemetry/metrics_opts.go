package telemetry

import "fmt"

// MetricsOpt configures [NewMetrics] and [NewPrometheus]. Nil options are skipped; the first
// error stops construction.
type MetricsOpt func(*metricsOptions) error

type metricsOptions struct {
	kinds    []string
	labelCap int
}

func defaultMetricsOptions() metricsOptions {
	return metricsOptions{labelCap: DefaultLabelCap}
}

// WithKinds lists the sandbox kinds that always have series of their own in
// maf_sandbox_acquires_total and maf_sandbox_sandboxes, whatever other kinds callers send
// (labels.go).
func WithKinds(kinds ...string) MetricsOpt {
	return func(o *metricsOptions) error {
		o.kinds = append(o.kinds, kinds...)
		return nil
	}
}

// WithLabelCap bounds how many values of each caller-chosen label (a sandbox's kind, a key's
// scope), beyond those [WithKinds] lists, get series of their own, in order of first use; the
// rest are counted under [LabelOther] (default [DefaultLabelCap]; 0: only the listed kinds).
// [ErrOption] for a negative n.
func WithLabelCap(n int) MetricsOpt {
	return func(o *metricsOptions) error {
		if n < 0 {
			return fmt.Errorf("%w: label cap %d is negative", ErrOption, n)
		}
		o.labelCap = n
		return nil
	}
}
