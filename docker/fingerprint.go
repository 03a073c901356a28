package docker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/label"
)

// Fingerprinting is the seam the fingerprint subject needs (docker-backend §12.5): the
// engine's root-filesystem change list, the facts a measurement refuses on, the observer
// image's ID, and one run of the observer container. It is separate from [Containers] (nothing in
// the serving path needs it); [*Engine] implements it. Every method binds first and fails as [Containers]'s methods do ([ErrUnreachable],
// [ErrTimeout], the context's error, [*CommandError]).
type Fingerprinting interface {
	// Changes lists the changes to the root filesystem of the container with this full ID
	// since it was created (`docker diff`, the API's container changes endpoint), in the
	// engine's order. [ErrNotFound] when it is absent; [ErrInvalid] for anything but a full
	// 64-hex ID, before any engine call; an entry that is not one of the engine's three
	// kinds with an absolute path fails the whole list (an error of no exported class).
	Changes(ctx context.Context, id string) ([]Change, error)
	// InspectConfinement reads, in one inspect, what a measurement of the container refuses
	// on. [ErrNotFound] when it is absent.
	InspectConfinement(ctx context.Context, target string) (Confinement, error)
	// InspectImage resolves a local image reference to its ID. [ErrNotFound] when the image
	// is not present (nothing is pulled).
	InspectImage(ctx context.Context, ref string) (ImageRecord, error)
	// RunObserver runs one observer container to completion (see [ObserverSpec] for its
	// hardening) and returns its exit code and output. The container is removed before
	// RunObserver returns on every path: success, failure, ctx's end, and a panic on the
	// calling goroutine; a removal that fails is logged and its error joined to the result.
	// [*OutputLimitError] when stdout went over spec.MaxOutputBytes; [*TimeoutError] when
	// the run outlived spec.Timeout; [ErrImageMissing] when the image is not present.
	RunObserver(ctx context.Context, spec ObserverSpec) (ObserverOutput, error)
}

// ChangeKind is the kind of one root-filesystem change.
type ChangeKind string

// The engine's change kinds, as `docker diff` prints them.
const (
	ChangeAdded    ChangeKind = "A"
	ChangeModified ChangeKind = "C"
	ChangeDeleted  ChangeKind = "D"
)

// Change is one root-filesystem change.
type Change struct {
	Kind ChangeKind
	Path string
}

// Confinement is what the fingerprint subject refuses on, from one inspect.
type Confinement struct {
	ID         string
	Running    bool
	StartedAt  string // as the engine wrote it: a restart changes it
	PidMode    string // HostConfig.PidMode: "" or "private" is the container's own namespace
	Privileged bool
	Mounts     []MountPoint
	Labels     map[string]string // the container's labels
	// Entrypoint is Config.Entrypoint: the program the container's first process runs when
	// the container names one (the exec channel's supervisor, for one).
	Entrypoint []string
	// The engine-managed files bind-mounted at /etc/hosts, /etc/hostname, /etc/resolv.conf,
	// as host paths.
	HostsPath, HostnamePath, ResolvConfPath string
}

// MountPoint is one declared mount of a container.
type MountPoint struct {
	Type        string // bind, volume, tmpfs, ...
	Destination string
	RW          bool
}

// ImageRecord is an image resolved to its ID.
type ImageRecord struct {
	ID      string // sha256:<64 hex>
	Volumes []string
}

// ObserverSpec is one observer run. The container is hardened beyond the caller's reach: no
// network, a read-only root, every capability dropped but SYS_PTRACE (to read the workload's
// processes and root through /proc), no new privileges, user 0:0, joined to the PID
// namespace of the workload Target, never pulled, bounded in pids and memory.
type ObserverSpec struct {
	Name   string        // the observer container's name
	Image  string        // the observer image, by ID
	Target string        // the workload container's full ID
	Args   []string      // appended to the image's entrypoint
	Labels []label.Label // Config.Labels are appended
	// MaxOutputBytes bounds stdout (stderr is kept to [observerStderrMax]); going over it
	// fails the run with [*OutputLimitError].
	MaxOutputBytes int64
	// Timeout bounds the whole run; zero means Config.CommandTimeout.
	Timeout time.Duration
}

// ObserverOutput is what the observer container returned.
type ObserverOutput struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// Observer hardening limits.
const (
	observerPidsLimit = 16
	observerMemory    = "256m"
	observerStderrMax = 64 << 10
	// observerRemoveTimeout bounds the removal that runs after ctx may have ended.
	observerRemoveTimeout = 2 * time.Minute
)

var (
	imageID    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	observerNm = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)
)

// withLabels checks the spec the engine is given and returns it with the configuration's
// labels merged in and its timeout resolved.
func (spec ObserverSpec) withLabels(extra map[string]string, commandTimeout time.Duration) (ObserverSpec, error) {
	if !observerNm.MatchString(spec.Name) {
		return spec, fmt.Errorf("run observer: %w: name %q", ErrInvalid, spec.Name)
	}
	if !imageID.MatchString(spec.Image) {
		return spec, fmt.Errorf("run observer %s: %w: the image must be given by its ID, not %q", spec.Name, ErrInvalid, spec.Image)
	}
	if err := checkID("run observer", spec.Target); err != nil {
		return spec, err
	}
	if spec.MaxOutputBytes <= 0 {
		return spec, fmt.Errorf("run observer %s: %w: the output bound must be positive", spec.Name, ErrInvalid)
	}
	labels, err := checkedLabels(spec.Labels, extra)
	if err != nil {
		return spec, fmt.Errorf("run observer %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	if spec.Timeout <= 0 {
		spec.Timeout = commandTimeout
	}
	return spec, nil
}

// cliObserverRunArgs is the observer's `docker run`, attached, removed by the daemon when it
// exits (and by RunObserver in any case).
func cliObserverRunArgs(s ObserverSpec) []string {
	args := []string{"run", "--rm", "--name", s.Name, "--pull", "never",
		"--network", "none", "--read-only", "--cap-drop", "ALL", "--cap-add", "SYS_PTRACE",
		"--security-opt", "no-new-privileges", "--user", "0:0", "--pid", "container:" + s.Target,
		"--pids-limit", strconv.Itoa(observerPidsLimit), "--memory", observerMemory}
	for _, l := range s.Labels {
		args = append(args, "--label", l.Key+"="+l.Value)
	}
	return append(append(args, s.Image), s.Args...)
}

// errMalformedAnswer is an engine answer the fingerprint seam cannot read as the engine
// documents it: a change list entry, an inspect or an image ID of the wrong shape.
var errMalformedAnswer = errors.New("docker: malformed answer")

// parseChanges reads `docker diff` output: one "K /path" line per change. The path is the rest
// of the line, spaces included; the engine does not quote it.
func parseChanges(out []byte) ([]Change, error) {
	var changes []Change
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		if len(line) < 3 || line[1] != ' ' {
			return nil, fmt.Errorf("%w: diff line %q", errMalformedAnswer, line)
		}
		c, err := newChange(line[:1], line[2:])
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// newChange checks one change.
func newChange(kind, path string) (Change, error) {
	switch k := ChangeKind(kind); k {
	case ChangeAdded, ChangeModified, ChangeDeleted:
		if strings.HasPrefix(path, "/") {
			return Change{Kind: k, Path: path}, nil
		}
	}
	return Change{}, fmt.Errorf("%w: change %q %q", errMalformedAnswer, kind, path)
}
