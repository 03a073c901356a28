package actors

import (
	"fmt"

	"github.com/mafsandbox/engine/sandbox"
)

// ProcessLimits bound the processes of one sandbox (docs/architecture.md, "Processes"). Each
// refusal is a [*sandbox.ProcessLimitError] naming its bound; nothing is half started.
type ProcessLimits struct {
	// MaxProcesses is how many processes one sandbox runs at once (default 128).
	MaxProcesses int
	// MaxStdinBytes is the most one stdin write carries (default 1 MiB).
	MaxStdinBytes int
	// Held is how many bytes of one process's output the sandbox's supervisor holds while
	// nothing has stored them (default 4 MiB, at most [MaxProcessHeld]); past it the oldest are
	// dropped, and a reader from before them is told the range it lost. A process's own
	// retention asks for more or less, within MaxProcessHeld. The supervisor holds at most
	// 64 MiB for all its processes together.
	Held int64
	// ReadBytes is how much one read returns when the caller sets no bound (default 1 MiB).
	ReadBytes int64
	// OutputRate is how many bytes a second of one process's output the store is given
	// (default 64 MiB/s): a process that writes faster is held back by its supervisor (its
	// writes wait), so one process cannot take the store's whole bandwidth.
	OutputRate int64
}

// Process bounds' defaults and ceilings.
const (
	DefaultMaxProcesses  = 128
	DefaultMaxStdinBytes = sandbox.MiB
	DefaultProcessHeld   = 4 * sandbox.MiB
	MaxProcessHeld       = 64 * sandbox.MiB
	DefaultReadBytes     = sandbox.MiB
	DefaultOutputRate    = 64 * sandbox.MiB
)

func defaultProcessLimits() ProcessLimits {
	return ProcessLimits{MaxProcesses: DefaultMaxProcesses, MaxStdinBytes: DefaultMaxStdinBytes, Held: DefaultProcessHeld, ReadBytes: DefaultReadBytes,
		OutputRate: DefaultOutputRate}
}

// WithProcessLimits sets the bounds of every sandbox's processes; a zero field keeps its
// default. A negative one, or Held above [MaxProcessHeld], is refused.
func WithProcessLimits(l ProcessLimits) Option {
	return func(o *options) error {
		if l.MaxProcesses < 0 || l.MaxStdinBytes < 0 || l.Held < 0 || l.ReadBytes < 0 || l.OutputRate < 0 || l.Held > MaxProcessHeld {
			return fmt.Errorf("process limits: every bound is positive (held at most %d): %+v", MaxProcessHeld, l)
		}
		d := defaultProcessLimits()
		if l.MaxProcesses > 0 {
			d.MaxProcesses = l.MaxProcesses
		}
		if l.MaxStdinBytes > 0 {
			d.MaxStdinBytes = l.MaxStdinBytes
		}
		if l.Held > 0 {
			d.Held = l.Held
		}
		if l.ReadBytes > 0 {
			d.ReadBytes = l.ReadBytes
		}
		if l.OutputRate > 0 {
			d.OutputRate = l.OutputRate
		}
		o.procLimits = d
		return nil
	}
}
