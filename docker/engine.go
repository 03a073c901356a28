package docker

import (
	"context"
	"time"
)

// Driver is what the actor engine asks of one Docker engine, and no more: the container calls
// ([Containers]), the allowlist topology ([Networks]), the reaper's inventory ([Inventory]), the
// daemon's identity and security options, and the two calls the freeze and the file walk rely
// on. [*Engine] implements it; it is an interface so that the actors' tests can drive a fake
// daemon. A consumer that needs less declares a smaller interface where it uses it (the
// reaper's [Inventory], the fingerprint's engine, the events' daemon ID).
type Driver interface {
	Containers
	Networks
	Inventory
	// EngineID returns the daemon's own ID (`docker info`'s ID), the "engineId" of the events
	// this engine publishes. Errors as [Containers]'s methods; an empty or unreadable answer is an
	// error too.
	EngineID(ctx context.Context) (string, error)
	// SecurityOptions returns the daemon's security options (`docker info`'s SecurityOptions,
	// e.g. "name=seccomp,profile=default", "name=userns", "name=rootless"): the host file plane
	// is refused on a user-namespace-remapped or rootless daemon, whose guest uids are not the
	// host's. Errors as [Containers]'s methods.
	SecurityOptions(ctx context.Context) ([]string, error)
	// ExecWithStart runs req exactly as Exec does, and calls started exactly once, on any
	// goroutine, as soon as a freeze can no longer race the exec's start: the engine reports
	// the exec's process running, or the exec ended, or it was refused or failed without a
	// process. started is always called before ExecWithStart returns, and must not block.
	//
	// It exists for the freeze. On a 20.10 engine a pause that lands between the daemon's "is
	// it paused" check of an exec start and runc's exec deadlocks the container: runc joins a
	// frozen cgroup while the daemon holds the container's lock. Once the exec's process runs,
	// a pause is harmless (it freezes that process too). So a caller that must not freeze
	// while an exec is starting waits for started instead of for the whole exec.
	ExecWithStart(ctx context.Context, req ExecRequest, started func()) (ExecOutput, error)
	// StatType describes guestPath as Stat does (no-follow, answered by the engine, never the
	// guest; (nil, nil) only on proven absence; the same errors), from the engine's archive
	// stat alone: Name, Type, Typeflag, Size (regular files only), Mode (permission, setuid,
	// setgid and sticky bits) and LinkTarget. UID and GID are -1: the engine's stat does not
	// carry them. A 20.10 engine answers it in about a millisecond, against about 40 ms for the
	// archive GET that Stat reads (every GET starts a chrooted tar process), so callers that
	// decide on the kind alone (the ancestor walk of a frozen stat, read or write) use it;
	// callers that need the owner (the reach rule) use Stat.
	StatType(ctx context.Context, target, guestPath string) (*Entry, error)
}

// Containers is the container part of [Driver]: exactly what the actors ask of one container, nothing
// more. Every method binds first (see Binding in the package doc) and so may also return what Bind
// returns.
//
// Common to every method: [ErrUnreachable] when the daemon cannot be reached, the bound context
// is gone or the client cannot be started (never a sign of absence); [*TimeoutError] (matches
// [ErrTimeout]) when a control call outlives Config.CommandTimeout; the context's own error,
// wrapped, when ctx is cancelled or its deadline passes; [*CommandError] for any other engine
// answer, carrying the arguments, exit code and stderr.
type Containers interface {
	// Bind resolves and pins the client context and endpoint (once; later calls return it).
	Bind(ctx context.Context) (Binding, error)
	// ServerOS returns the daemon's OS, trimmed and lower-cased ("linux").
	ServerOS(ctx context.Context) (string, error)
	// ServerVersion returns the daemon's version as it reports it ("20.10.24+dfsg1").
	ServerVersion(ctx context.Context) (string, error)
	// Inspect reads one container (by name or ID) in one call. [ErrNotFound] when it is absent.
	Inspect(ctx context.Context, target string) (ContainerInfo, error)
	// ImageExists reports whether image is present locally; absence is (false, nil).
	ImageExists(ctx context.Context, image string) (bool, error)
	// ImageEntrypoint is ImageExists that also reads the image's configured entrypoint (nil
	// when it has none): what a container of it runs before its command.
	ImageEntrypoint(ctx context.Context, image string) (entrypoint []string, present bool, err error)
	// Create makes a workload container from spec without starting it and returns its ID: it
	// has no guest process until Start, so its filesystem can be prepared without a freeze.
	// [ErrConflict] when the name is in use; [ErrInvalid] for a spec refused before any engine
	// call.
	Create(ctx context.Context, spec CreateSpec) (string, error)
	// Start starts a stopped container. [ErrNotFound] when it is absent.
	Start(ctx context.Context, target string) error
	// Rename gives target the name newName (a warm pool's member at hand-out): [ErrNotFound]
	// when target is absent, [ErrConflict] when newName is taken.
	Rename(ctx context.Context, target, newName string) error
	// Remove force-removes a container: [Removed] when it removed one, [Absent] when there was
	// none. A timeout leaves the outcome unknown.
	Remove(ctx context.Context, target string) (RemoveOutcome, error)
	// Pause freezes a container. [ErrNotFound] when absent, [ErrPaused] when already paused,
	// [ErrNotRunning] when stopped, [ErrFreezeFailed] when the freezer gave up on a busy guest.
	Pause(ctx context.Context, target string) error
	// Unpause thaws a container. nil means the freeze is lifted: unpaused now, not paused, or
	// absent all count.
	Unpause(ctx context.Context, target string) error
	// Exec runs req.Argv in a container; only ctx bounds it. A non-zero exit, including a
	// program's own 126 and 127 and daemon answers about the target, is a result, not an error:
	// stderr is the guest's channel too. The exceptions are the daemon's frozen refusal
	// ([ErrPaused], returned with the refusal as output: the command never started) and the
	// runtime's failure to start the process ([*ExecStartError]: a missing working directory
	// or program, returned with the daemon's answer as output).
	// [*OutputLimitError] when req.MaxOutputBytes is set and the output went over it (no
	// partial result).
	Exec(ctx context.Context, req ExecRequest) (ExecOutput, error)
	// Stat describes guestPath in the container from the engine's archive header alone
	// (no-follow, body never read). (nil, nil) only on proven absence. [ErrPathAbsentUnconfirmed]
	// for the older client's ambiguous answer when target is a name (with a full instance ID it
	// is confirmed here); [ErrNotFound] when the container is gone; an error of no exported
	// class for an archive the bounded reader refuses.
	Stat(ctx context.Context, target, guestPath string) (*Entry, error)
	// Read returns guestPath's header and, for a regular file, its bytes. [ErrPathAbsent] when
	// absent, otherwise as Stat; [*CapExceededError] when the header's size is above maxBytes
	// (the body is never read); an error of no exported class when the body ends early. Other
	// entry kinds come back with a nil body for the caller to refuse.
	Read(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error)
	// CopyIn extracts a tar archive (see [BuildTar]) at / in the container. [ErrNotFound] when
	// the container is absent.
	CopyIn(ctx context.Context, target string, tarball []byte) error
	// ListNames lists the names of all containers, running or not, carrying every label in
	// labelFilters (an empty value means "present, any value") and, when nameFilter is not
	// empty, matching it as the engine's name filter. A failed listing is an error, never an
	// empty list.
	ListNames(ctx context.Context, labelFilters map[string]string, nameFilter string) ([]string, error)
	// Events streams container lifecycle events matching filter from the moment of the call
	// until ctx ends; the channel is then closed and the client reaped. If the stream ends for
	// another reason, its last value carries Err.
	Events(ctx context.Context, filter EventFilter) (<-chan Event, error)
}

// ContainerInfo is what one inspect of a container returns.
type ContainerInfo struct {
	ID       string
	Name     string // without the engine's leading "/"
	Image    string // the image reference it was created from
	ImageID  string
	Created  time.Time
	Status   string // created, running, paused, restarting, removing, exited, dead
	Running  bool
	Paused   bool
	ExitCode int
	Labels   map[string]string
	User     string // Config.User, trimmed
	// Entrypoint and Cmd are Config.Entrypoint and Config.Cmd: what the container's first
	// process runs (an allowlisted workload's gate is told apart by them).
	Entrypoint []string
	Cmd        []string
	CapDrop    []string          // HostConfig.CapDrop
	CapAdd     []string          // HostConfig.CapAdd (the API driver reads it)
	Networks   map[string]string // network name → network ID
	// Pid and StartedAt are State.Pid and State.StartedAt: the host pid of the init process
	// of a running container (0 otherwise) and when it was started. The host file plane
	// proves a process is the container's with them (actors/hostfs).
	Pid       int
	StartedAt time.Time
}

// RemoveOutcome says what a removal found.
type RemoveOutcome int

// Removal outcomes.
const (
	Removed RemoveOutcome = iota + 1 // a container was there and is gone
	Absent                           // there was nothing to remove
)

func (o RemoveOutcome) String() string {
	switch o {
	case Removed:
		return "removed"
	case Absent:
		return "absent"
	}
	return "unknown"
}

// ExecRequest is one command run in a container through `docker exec`.
type ExecRequest struct {
	Target  string
	User    string   // "" leaves the image's USER in charge
	WorkDir string   // "" leaves the image's working directory
	Env     []string // K=V pairs, each passed as -e; empty for workload commands
	Argv    []string // passed element for element, no shell
	// MaxOutputBytes, when positive, is the budget of stdout and stderr together; going over it
	// kills the client and fails the exec with [*OutputLimitError].
	MaxOutputBytes int64
	// Output, when set, is handed each piece of output as the driver reads it: stream 1 is
	// stdout, 2 is stderr. It is called from the driver's reading goroutines (stdout and
	// stderr may each have their own, so calls for different streams can be concurrent), in
	// order within a stream, only for bytes within MaxOutputBytes, and never after Exec
	// returns. p is valid only during the call: copy it to keep it. Output must not block for
	// long, since the command's output waits for it. The returned [ExecOutput] still carries
	// the whole output.
	Output func(stream int, p []byte)
}

// Output streams of [ExecRequest.Output].
const (
	StreamStdout = 1
	StreamStderr = 2
)

// ExecOutput is what one exec returned, as bytes.
type ExecOutput struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// EventFilter narrows an event stream. Only container events are streamed.
type EventFilter struct {
	Labels     map[string]string // label filters, as in ListNames
	Containers []string          // names or IDs
	Actions    []string          // e.g. "start", "die", "pause", "unpause", "destroy"
}

// Event is one container lifecycle event.
type Event struct {
	Action     string // start, die, pause, unpause, destroy, ...
	ID         string // the container's ID
	Name       string // the container's name, from the event's attributes
	Attributes map[string]string
	Time       time.Time
	// Err is set only on the last value of a stream that ended on its own (not by ctx).
	Err error
}

// Networks is the part of [Driver] the allowlist topology needs (egress-and-reap.md §1.3,
// §1.5, §3.2): the per-sandbox internal network and the egress proxy container. Every method
// binds first and fails as [Containers]'s methods do ([ErrUnreachable], [ErrTimeout], the
// context's error, [*CommandError]).
type Networks interface {
	// NetworkCreate runs `network create --driver bridge --internal` with both isolated
	// gateway-mode options and spec's labels, and returns the network's ID. [ErrNetworkExists]
	// when the name is taken; [ErrGatewayModeRejected] when the engine refused an option naming
	// a gateway-mode key (an engine older than 28.0.0 that knows the key).
	NetworkCreate(ctx context.Context, spec NetworkSpec) (string, error)
	// NetworkInspect reads one network by name or ID. [ErrNotFound] when it is absent.
	NetworkInspect(ctx context.Context, ref string) (NetworkInfo, error)
	// NetworkConnect attaches container to network. [ErrNotFound] when either is absent.
	NetworkConnect(ctx context.Context, network, container string) error
	// NetworkRemove removes a network by ID, never forced: [Removed], or [Absent] when there
	// was none. A network with endpoints still attached is refused ([*CommandError]).
	NetworkRemove(ctx context.Context, id string) (RemoveOutcome, error)
	// ProxyCreate makes the proxy container of spec without starting it (`--pull never`, the
	// §1.5 hardening, attached to spec.Network only) and returns its ID. [ErrConflict] when the
	// name is in use; [ErrImageMissing] when the image is not present.
	ProxyCreate(ctx context.Context, spec ProxySpec) (string, error)
	// ProxyStart starts a created proxy by ID. [ErrNotFound] when it is absent.
	ProxyStart(ctx context.Context, id string) error
	// ProxyStop stops a proxy by ID after grace. [ErrNotFound] when it is absent.
	ProxyStop(ctx context.Context, id string, grace time.Duration) error
	// ProxyLogs returns the last tail lines of the proxy's stdout, with the engine's
	// timestamps, reading at most maxBytes+1 bytes (so a caller's parser can tell the cap was
	// reached). [ErrNotFound] when the proxy is absent.
	ProxyLogs(ctx context.Context, id string, tail, maxBytes int) ([]byte, error)
}

// Inventory is the part of [Driver] the reaper needs (egress-and-reap.md §4): list the
// engine's containers and networks by label, inspect one by ID, and remove one by ID. The
// reaper asks for this alone — it needs less than the actors do.
//
// Common to every method, as for [Containers]: [ErrUnreachable] when the daemon cannot be reached;
// [*TimeoutError] (matches [ErrTimeout]) when a call outlives Config.CommandTimeout; the
// context's own error, wrapped, when ctx ends; [*CommandError] for any other engine answer.
// Every method that takes an id refuses anything but a full 64-hex ID with [ErrInvalid]
// before any engine call: the reaper addresses resources by their inspected ID only.
type Inventory interface {
	// ListContainerIDs lists the full IDs of every container, running or not, carrying every
	// label in labelFilters (an empty value means "present, any value"). A failed listing is an
	// error, never an empty list.
	ListContainerIDs(ctx context.Context, labelFilters map[string]string) ([]string, error)
	// ListNetworkIDs lists the full IDs of every network carrying every label in labelFilters.
	ListNetworkIDs(ctx context.Context, labelFilters map[string]string) ([]string, error)
	// InspectContainerID reads one container by ID. [ErrNotFound] when it is absent. The record
	// is returned as the engine wrote it (Created unparsed, ID as answered) so the caller can
	// refuse what it cannot trust.
	InspectContainerID(ctx context.Context, id string) (Resource, error)
	// InspectNetworkID reads one network by ID. [ErrNotFound] when it is absent.
	InspectNetworkID(ctx context.Context, id string) (Resource, error)
	// RemoveContainerID force-removes the container with this ID (a running one is killed):
	// [Removed] or [Absent].
	RemoveContainerID(ctx context.Context, id string) (RemoveOutcome, error)
	// RemoveNetworkID removes the network with this ID, never forced: a network that still has
	// endpoints is refused by the engine (a bare [*CommandError]) and left in place.
	// [Removed] or [Absent].
	RemoveNetworkID(ctx context.Context, id string) (RemoveOutcome, error)
}

// Resource is one inspected container or network, as the engine described it.
type Resource struct {
	ID      string            // the ID the inspection answered with ("" when it had none)
	Name    string            // without the engine's leading "/"
	Labels  map[string]string // never nil
	Created string            // the engine's creation time, verbatim (RFC 3339 expected)
	// Containers are the IDs of the containers attached to a network, sorted; nil for a
	// container.
	Containers []string
	Running    bool // a container's State.Running
}

var _ Driver = (*Engine)(nil)
