package sandbox

import (
	"fmt"
	"math"
	"strconv"
)

// MiB is 1,048,576 bytes.
const MiB = 1 << 20

// TransferLimits caps one direction of file transfer. All three fields bind: byte caps alone
// leave a collection of very many small files unbounded.
//
// The zero value is a real cap that refuses everything, not "unset"; use
// [DefaultTransferLimits] for the default.
type TransferLimits struct {
	MaxBytesPerFile int64
	MaxTotalBytes   int64
	MaxFiles        int64
}

// DefaultTransferLimits is both a spec's default caps and a silent backend's ceilings, so the
// default always fits the default: 8 MiB a file, 32 MiB in all, 64 files.
func DefaultTransferLimits() TransferLimits {
	return TransferLimits{MaxBytesPerFile: 8 * MiB, MaxTotalBytes: 32 * MiB, MaxFiles: 64}
}

// Within reports whether every field of l is at most c's.
func (l TransferLimits) Within(c TransferLimits) bool {
	return l.MaxBytesPerFile <= c.MaxBytesPerFile && l.MaxTotalBytes <= c.MaxTotalBytes && l.MaxFiles <= c.MaxFiles
}

func (l TransferLimits) String() string {
	return fmt.Sprintf("{%d bytes a file, %d bytes in all, %d files}", l.MaxBytesPerFile, l.MaxTotalBytes, l.MaxFiles)
}

// SandboxLimits are a backend's ceilings for each direction.
type SandboxLimits struct {
	FilesIn  TransferLimits
	FilesOut TransferLimits
}

// DefaultSandboxLimits is the default ceiling in both directions.
func DefaultSandboxLimits() SandboxLimits {
	return SandboxLimits{FilesIn: DefaultTransferLimits(), FilesOut: DefaultTransferLimits()}
}

// Resources bound what one sandbox may use of its host: memory in bytes, CPUs (a share of one
// CPU's time: 0.5, 2) and processes. A zero field states nothing. In a [Spec] it is what the
// workload asks for; in [Declarations] it is the most the backend lets a workload have, a zero
// field there meaning no ceiling.
type Resources struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int64
}

// IsZero reports whether r states nothing.
func (r Resources) IsZero() bool { return r == Resources{} }

func (r Resources) validate() error {
	switch {
	case r.MemoryBytes < 0:
		return &InvalidArgumentError{Reason: "resources: memory_bytes is negative"}
	case r.Pids < 0:
		return &InvalidArgumentError{Reason: "resources: pids is negative"}
	case r.CPUs < 0 || math.IsNaN(r.CPUs) || math.IsInf(r.CPUs, 0):
		return &InvalidArgumentError{Reason: "resources: cpus must be a finite number, zero or more"}
	}
	return nil
}

// exceeds returns the first resource of asked over ceiling (a ceiling's zero field bounds
// nothing), with both values as text; "" when asked fits.
func (asked Resources) exceeds(ceiling Resources) (name, ask, bound string) {
	switch {
	case ceiling.MemoryBytes > 0 && asked.MemoryBytes > ceiling.MemoryBytes:
		return "memory_bytes", strconv.FormatInt(asked.MemoryBytes, 10), strconv.FormatInt(ceiling.MemoryBytes, 10)
	case ceiling.CPUs > 0 && asked.CPUs > ceiling.CPUs:
		return "cpus", strconv.FormatFloat(asked.CPUs, 'g', -1, 64), strconv.FormatFloat(ceiling.CPUs, 'g', -1, 64)
	case ceiling.Pids > 0 && asked.Pids > ceiling.Pids:
		return "pids", strconv.FormatInt(asked.Pids, 10), strconv.FormatInt(ceiling.Pids, 10)
	}
	return "", "", ""
}
