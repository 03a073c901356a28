package sandbox

import "fmt"

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
