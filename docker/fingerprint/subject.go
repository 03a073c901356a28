package fingerprint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/internal/observation"
	"github.com/mafsandbox/engine/sandbox"
)

// Engine is what the subject needs of the engine: the daemon's OS, the fingerprint seam and
// the no-follow stat of a guest path ([docker.Engine]'s Stat: nil, nil when absent).
// [*docker.CLI] and [*docker.API] implement it.
type Engine interface {
	ServerOS(ctx context.Context) (string, error)
	Stat(ctx context.Context, target, guestPath string) (*docker.Entry, error)
	docker.Fingerprinting
}

// Container is the workload a subject measures; the Docker backend's sandbox
// (actors.Sandbox) is one. A container that also has a WorkDir() string method names its
// storage base with it (see [WithStorageBase]).
type Container interface {
	ContainerName() string
	InstanceID() string
}

// ObserverNamePrefix starts the name of every observer container.
const ObserverNamePrefix = docker.ObserverNamePrefix

// Subject is the Docker [sandbox.FingerprintSubject] of one workload. It is safe for
// concurrent use, though fingerprints of one workload are meant to be taken one at a time.
type Subject struct {
	eng       Engine
	name, id  string
	imageID   string
	limits    observation.Limits
	timeout   time.Duration
	maxOutput int64
	log       *zap.Logger
	base      string // the storage base, "" when unknown

	mu       sync.Mutex
	baseline *state // nil until the first fingerprint
}

// state is what the baseline keeps for the final comparison.
type state struct {
	entries map[string]observation.Entry
	root    map[string]observation.Entry // the root filesystem's, stat'ed
	mounts  []observation.Mount
	managed map[string]bool    // engine-managed mounts, verified: compared without ctime
	pre     map[string]dirMeta // the storage base's paths already changed, by their stat
}

// dirMeta is what the engine's no-follow stat says of a path: what the final fingerprint
// compares for a path the baseline's change list already held.
type dirMeta struct {
	typ      docker.EntryType
	mode     int64
	uid, gid int
	// observed: a socket, which the engine's archive stat cannot read (tar has no socket);
	// only the observer's root walk compares it, by every field.
	observed bool
}

var _ sandbox.FingerprintSubject = (*Subject)(nil)

// New builds the subject of c on eng and resolves the observer image to its ID, which every
// observation then runs. The storage base is [WithStorageBase]'s, else c's WorkDir() when it
// has that method. It fails with [*sandbox.InvalidArgumentError] for a missing engine or
// container, a missing observer image, a bad option or a WorkDir that is not absolute, and with [*UnreadableError] when
// the observer image cannot be resolved or declares a volume (a volume would be a writable
// mount of the observer's own).
func New(ctx context.Context, eng Engine, c Container, opts ...Option) (*Subject, error) {
	if eng == nil || c == nil || c.ContainerName() == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "fingerprint: the subject needs an engine and a container"}
	}
	o, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	if wd, ok := c.(interface{ WorkDir() string }); ok && !o.baseSet && wd.WorkDir() != "" {
		if err := WithStorageBase(wd.WorkDir())(&o); err != nil {
			return nil, err
		}
	}
	rec, err := eng.InspectImage(ctx, o.image)
	if err != nil {
		return nil, &UnreadableError{What: "the observer image " + o.image + " (engine images build makes it)", Err: err}
	}
	if len(rec.Volumes) > 0 {
		return nil, &UnreadableError{What: "the observer image " + o.image,
			Err: fmt.Errorf("it declares volumes %v, which would give the observer writable storage", rec.Volumes)}
	}
	return &Subject{eng: eng, name: c.ContainerName(), id: c.InstanceID(), imageID: rec.ID, limits: o.limits,
		timeout: o.timeout, maxOutput: o.maxOutput, base: o.base,
		log: o.log.With(zap.String("container", c.ContainerName()))}, nil
}

// ObserverImageID is the observer image's ID, resolved by [New].
func (s *Subject) ObserverImageID() string { return s.imageID }

// Fingerprint implements [sandbox.FingerprintSubject]. The first call is the baseline.
func (s *Subject) Fingerprint(ctx context.Context) (sandbox.Fingerprint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.linux(ctx); err != nil {
		return sandbox.Fingerprint{}, err
	}
	before, err := s.confinement(ctx)
	if err != nil {
		return sandbox.Fingerprint{}, err
	}
	first := s.baseline == nil
	var pre map[string]dirMeta
	if !first {
		pre = s.baseline.pre
	}
	changed := map[string]bool{}
	if err := s.changes(ctx, before.ID, pre, changed); err != nil {
		return sandbox.Fingerprint{}, err
	}
	if first {
		if pre, err = s.preChanged(ctx, before, changed); err != nil {
			return sandbox.Fingerprint{}, err
		}
	}
	report, err := s.observe(ctx, before)
	if err != nil {
		return sandbox.Fingerprint{}, err
	}
	if err := s.againstBaseline(before, report, pre, changed); err != nil {
		return sandbox.Fingerprint{}, err
	}
	if err := s.unchangedSince(ctx, before, pre, first, changed); err != nil {
		return sandbox.Fingerprint{}, err
	}
	programs := make([]string, 0, len(report.Processes))
	for _, p := range report.Processes {
		programs = append(programs, p.Identity())
	}
	return sandbox.NewFingerprint(slices.Collect(maps.Keys(changed)), programs), nil
}

// linux refuses a daemon that does not run Linux: unsupported on the baseline (the probe's
// skip), an unreadable workload after it.
func (s *Subject) linux(ctx context.Context) error {
	osName, err := s.eng.ServerOS(ctx)
	if err != nil {
		return &UnreadableError{What: "the daemon's OS", Err: err}
	}
	if osName == "linux" {
		return nil
	}
	if s.baseline == nil {
		return fmt.Errorf("%w: the daemon runs %q; the Docker fingerprint reads Linux namespaces",
			sandbox.ErrFingerprintUnsupported, osName)
	}
	return &UnreadableError{What: "the daemon's OS", Err: fmt.Errorf("it now says %q", osName)}
}

// againstBaseline records the first observation as the baseline, which must be pristine, and
// adds to changed every mounted entry a later observation finds different from it; the mount
// table itself must not have changed, or the entries cannot be compared.
func (s *Subject) againstBaseline(c docker.Confinement, report observation.Report, pre map[string]dirMeta, changed map[string]bool) error {
	managed := verifiedManagedMounts(c, report.Mounts)
	if s.baseline == nil {
		if len(report.TmpfsEntries) > 0 {
			return &RefusedError{Reason: "the baseline is not pristine: tmpfs holds " + strings.Join(report.TmpfsEntries, ", ")}
		}
		s.baseline = &state{entries: report.Entries, root: report.RootEntries, mounts: report.Mounts, managed: managed, pre: pre}
		return nil
	}
	if !slices.Equal(report.Mounts, s.baseline.mounts) {
		return &UnreadableError{What: "the workload's mounts",
			Err: errors.New("the mount table changed since the baseline, so the entries cannot be compared")}
	}
	for p := range differingEntries(s.baseline.entries, report.Entries, sameMounted(s.baseline.managed)) {
		changed[p] = true
	}
	for p := range differingEntries(s.baseline.root, report.RootEntries, sameRoot) {
		changed[p] = true
	}
	return nil
}

// unchangedSince closes the observation: the workload must be the container of before, not
// restarted, and its second change list joins changed; after the baseline, each path already
// changed at the baseline (pre) is stat'ed again and joins changed when it is gone or differs.
func (s *Subject) unchangedSince(ctx context.Context, before docker.Confinement, pre map[string]dirMeta, first bool, changed map[string]bool) error {
	after, err := s.confinement(ctx)
	if err != nil {
		return err
	}
	if after.ID != before.ID || after.StartedAt != before.StartedAt {
		return &UnreadableError{What: "the workload",
			Err: errors.New("the container restarted or was replaced during the observation")}
	}
	if err := s.changes(ctx, before.ID, pre, changed); err != nil {
		return err
	}
	if first {
		return nil
	}
	for p, was := range pre {
		if was.observed {
			continue
		}
		now, err := s.stat(ctx, before.ID, p)
		if err != nil {
			return err
		}
		if now == nil || *now != was {
			changed[p] = true
		}
	}
	return nil
}

// confinement inspects the workload and refuses what the fingerprint cannot vouch for.
func (s *Subject) confinement(ctx context.Context) (docker.Confinement, error) {
	c, err := s.eng.InspectConfinement(ctx, s.name)
	if err != nil {
		return c, &UnreadableError{What: "the workload's inspect", Err: err}
	}
	// The shape of the workload is refused first: it is what no state of it can cure.
	switch {
	case s.id != "" && c.ID != s.id:
		return c, &RefusedError{Reason: fmt.Sprintf("%s is now container %s, not the sandbox's %s", s.name, c.ID, s.id)}
	case c.PidMode != "" && c.PidMode != "private":
		return c, &RefusedError{Reason: fmt.Sprintf("%s shares its PID namespace (%s): processes outside it would be counted, or it inside others", s.name, c.PidMode)}
	case c.Privileged:
		return c, &RefusedError{Reason: s.name + " is privileged: it can reach storage and processes no observation of it sees"}
	}
	for _, m := range c.Mounts {
		if m.RW {
			return c, &RefusedError{Reason: fmt.Sprintf("%s has a writable declared mount at %s (%s), storage shared beyond the sandbox", s.name, m.Destination, m.Type)}
		}
	}
	if !c.Running {
		return c, &RefusedError{Reason: s.name + " is not running"}
	}
	if s.id == "" {
		s.id = c.ID
	}
	return c, nil
}

// changes adds the engine's root-filesystem change list to into, but for the paths of
// skip, which are compared by their stat instead.
func (s *Subject) changes(ctx context.Context, id string, skip map[string]dirMeta, into map[string]bool) error {
	cs, err := s.eng.Changes(ctx, id)
	if err != nil {
		return &UnreadableError{What: "the root filesystem's change list", Err: err}
	}
	for _, c := range cs {
		if _, ok := skip[c.Path]; !ok {
			into[c.Path] = true
		}
	}
	return nil
}

// supervisorPaths are what the engine puts in a sandbox whose commands take the exec channel
// (cmd/execd, before start: the binary; once it runs: its socket's directory and socket), by
// the type each must have. They are the engine's own only in a container whose entrypoint is
// the supervisor; in any other they are a guest's files like the rest.
func supervisorPaths(c docker.Confinement) map[string]docker.EntryType {
	if !slices.Equal(c.Entrypoint, []string{execwire.Binary}) {
		return nil
	}
	return map[string]docker.EntryType{execwire.Binary: docker.EntryFile, execwire.SocketDir: docker.EntryDir, execwire.Socket: docker.EntryOther}
}

// preChanged takes the engine's own paths out of the baseline's change list changed — the
// storage base and its ancestors, each of which must be a directory, and the exec channel's
// supervisor paths, each of its own type — recording each by its stat, and refuses any other
// changed path: an already changed path can hide a second change to it, and only these are
// stat'ed again (and the observer compares every root-filesystem entry of the baseline with
// its ctime, so a rewritten supervisor binary is a change too).
func (s *Subject) preChanged(ctx context.Context, c docker.Confinement, changed map[string]bool) (map[string]dirMeta, error) {
	id := c.ID
	allowed := map[string]docker.EntryType{}
	for p := s.base; p != "" && p != "/"; p = path.Dir(p) {
		allowed[p] = docker.EntryDir
	}
	supervisor := supervisorPaths(c)
	for p, typ := range supervisor {
		allowed[p] = typ
	}
	var others []string
	for p := range changed {
		if _, ok := allowed[p]; !ok {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		return nil, &RefusedError{Reason: "the baseline is not pristine: the root filesystem changed at " +
			strings.Join(slices.Sorted(slices.Values(others)), ", ")}
	}
	pre := map[string]dirMeta{}
	for _, p := range slices.Sorted(maps.Keys(changed)) {
		if p == execwire.Socket {
			pre[p] = dirMeta{typ: docker.EntryOther, observed: true}
			delete(changed, p)
			continue
		}
		m, err := s.stat(ctx, id, p)
		if err != nil {
			return nil, err
		}
		if want := allowed[p]; m == nil || m.typ != want {
			what := "gone"
			if m != nil {
				what = "a " + m.typ.String()
			}
			if _, ok := supervisor[p]; ok {
				return nil, &RefusedError{Reason: fmt.Sprintf("the baseline is not pristine: %s, the exec channel's supervisor path, changed and is %s, not a %s",
					p, what, want)}
			}
			return nil, &RefusedError{Reason: fmt.Sprintf("the baseline is not pristine: %s, on the path of the storage base %s, changed and is %s, not a directory",
				p, s.base, what)}
		}
		pre[p] = *m
		delete(changed, p)
	}
	return pre, nil
}

// stat is the engine's no-follow stat of p in the workload; nil when p is absent.
func (s *Subject) stat(ctx context.Context, id, p string) (*dirMeta, error) {
	e, err := s.eng.Stat(ctx, id, p)
	if err != nil {
		return nil, &UnreadableError{What: "the engine's stat of " + p, Err: err}
	}
	if e == nil {
		return nil, nil
	}
	return &dirMeta{typ: e.Type, mode: e.Mode, uid: e.UID, gid: e.GID}, nil
}
