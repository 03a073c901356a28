package messages

import (
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// AcquireRequest asks a container actor to get or create its container for key and spec.
type AcquireRequest struct {
	Key      sandbox.Key
	Spec     sandbox.Spec
	EgressID string
}

// AcquireResponse carries the instance the acquire handed out.
type AcquireResponse struct {
	InstanceID string
	WorkDir    string // the storage base the sandbox is bound to
	Created    bool   // this acquire created the instance
	Err        error
}

// StatRequest asks for a no-follow description of Path under WorkDir.
type StatRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
}

// StatResponse carries the entry, nil when the engine says it is absent.
type StatResponse struct {
	Stat *sandbox.FileStat
	Err  error
}

// ReadRequest asks for a regular file's bytes, refused above MaxBytes.
type ReadRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
	MaxBytes   int64
}

// ReadResponse carries the file's bytes.
type ReadResponse struct {
	Content []byte
	Err     error
}

// WriteRequest asks to write Content at Path, replacing any file there.
type WriteRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
	Content    []byte
}

// WriteResponse says whether the write landed.
type WriteResponse struct {
	Err error
}

// ExecRequest asks to run Command in WorkDir within Timeout. A positive MaxOutputBytes caps
// stdout and stderr together.
type ExecRequest struct {
	InstanceID     string // the instance the caller acquired; a replaced one is refused
	Command        sandbox.Command
	WorkDir        string
	Timeout        time.Duration
	MaxOutputBytes int64
}

// ExecResponse carries the command's result.
type ExecResponse struct {
	Result sandbox.ExecResult
	Err    error
}

// RemoveRequest asks to remove Path (recursively when Recursive).
type RemoveRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
	Recursive  bool
}

// RemoveResponse says whether the removal landed.
type RemoveResponse struct {
	Err error
}

// ReclaimRequest asks to remove the framework-created directory Dir within Timeout.
type ReclaimRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Dir        string
	WorkDir    string
	Timeout    time.Duration
}

// ReclaimResponse says whether the reclaim landed.
type ReclaimResponse struct {
	Err error
}

// DisposeRequest asks a container actor to take its sandbox down in the teardown order of
// egress-and-reap.md §1.9: proxy (drained), workload, network. With an InstanceID it removes
// only that instance, its proxy and its network (docker-backend §14.4); without one it removes
// whatever holds the names (a purge). Caller is the key of a key-addressed disposal, which may
// stand in for a proxy's attribution (§3.5); nil for a sweep of a conversation. Trigger names
// the path in the published window.
type DisposeRequest struct {
	InstanceID string
	Caller     *sandbox.Key
	Trigger    egresslog.Trigger
}

// DisposeResponse says what the removal found. Removed counts only a container that was
// there; Failure is set when something may remain.
type DisposeResponse struct {
	Removed bool
	Failure *sandbox.DisposalFailure
}

// ContainerChanged is an engine lifecycle event of one container: start, die, pause,
// unpause, destroy.
type ContainerChanged struct {
	Name   string
	ID     string
	Action string
	At     time.Time
}
