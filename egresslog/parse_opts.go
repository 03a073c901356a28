package egresslog

import "fmt"

// Bounds of one read of a proxy's log (egress-and-reap.md §3.3).
const (
	// TailLines is how many of the newest lines a window keeps. The drain asks the engine for
	// TailLines+1 lines, so that a fuller log shows as [Truncation].Lines.
	TailLines = 10000
	// LogMaxBytes is how many bytes of the log are read at most. A decision line is at most
	// about 290 bytes (hosts are capped at 253), so the cap is far above a full tail.
	LogMaxBytes = 4 << 20
)

// ParseOpt changes how [ParseLog] reads a log.
type ParseOpt func(*parseOptions) error

type parseOptions struct {
	tailLines  int
	maxBytes   int
	timestamps bool
}

func defaultParseOptions() parseOptions {
	return parseOptions{tailLines: TailLines, maxBytes: LogMaxBytes}
}

// WithTailLines keeps the last n lines instead of [TailLines]. n must be positive.
func WithTailLines(n int) ParseOpt {
	return func(o *parseOptions) error {
		if n < 1 {
			return fmt.Errorf("egresslog: tail lines %d: must be positive", n)
		}
		o.tailLines = n
		return nil
	}
}

// WithMaxBytes reads at most n bytes instead of [LogMaxBytes]. n must be positive.
func WithMaxBytes(n int) ParseOpt {
	return func(o *parseOptions) error {
		if n < 1 {
			return fmt.Errorf("egresslog: max bytes %d: must be positive", n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithTimestamps reads a log written by `docker logs --timestamps`: every line starts with an
// RFC 3339 time and one space, which is stripped and kept as the decision's At. A line without
// that prefix is not a decision.
func WithTimestamps() ParseOpt {
	return func(o *parseOptions) error {
		o.timestamps = true
		return nil
	}
}
