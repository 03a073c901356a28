package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// acquireRequest asks a container actor to get or create its container for Key and Spec.
type acquireRequest struct {
	Key      sandbox.Key
	Spec     sandbox.Spec
	EgressID string
	// Pool, when set, makes a warm pool's member (pool.go): this pool label instead of the
	// key's labels, no key, and never a member taken from a pool.
	Pool string
	// Fresh asks for a new instance (snapshot.go): one found under the name is refused, and
	// no pool's member is taken.
	Fresh bool
}

// acquireResponse carries the instance the acquire handed out.
type acquireResponse struct {
	InstanceID string
	WorkDir    string // the storage base the sandbox is bound to
	Created    bool   // this acquire created the instance
	Outcome    string // created, reused, restarted or adopted (sandbox.Outcome…)
	ImageID    string // the image the instance runs, as the daemon reports it
	Err        error
}

func (*acquireRequest) needsFreeze() bool  { return false }
func (*acquireRequest) fail(err error) any { return &acquireResponse{Err: err} }

func (m *acquireRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	rec, asleep := a.b.sleeps.get(a.name)
	res := a.acquire(ctx, m)
	if res.Err == nil {
		if asleep && rec.State == sleepStopped { // sleep.go: started again, its processes not kept
			a.startedAgain(ctx, rec, res.Outcome, res.InstanceID)
		}
		a.slept(m, res.InstanceID)
		env.bound = a.binding() // read by the caller once the reply arrived
	}
	reply(res)
}

// acquire gets or creates the container in the spec's step order: bind, storage-base
// pre-check, thaw a container a dead host left frozen, OS re-check before any create or
// restart, reuse / restart / create (adopting on a name conflict), then the instance's facts,
// identity refusal, command probes and the storage base.
func (a *containerActor) acquire(ctx context.Context, m *acquireRequest) *acquireResponse {
	spec := m.Spec
	base := DefaultWorkDir
	if spec.WorkDir != nil {
		base = *spec.WorkDir
	}
	imageRef := spec.ImageID
	if imageRef == "" {
		imageRef = spec.Image
	}
	var egress *egressRun
	// egress hook: every failure joins the proxy being built (egress_run.go).
	fail := func(err error) *acquireResponse { return &acquireResponse{Err: a.joinEgress(egress, err)} }
	began := time.Now()
	if k := m.Key.String(); a.key != k {
		a.key = k
		a.setLogger()
	}
	info, err := a.found(ctx, base)
	if err != nil {
		return fail(err)
	}
	if m.Fresh && info != nil {
		return fail(&sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"%s already has a sandbox of kind %q (instance %.12s); a new one from a snapshot needs the key free", m.Key, spec.Kind, info.ID)})
	}
	// egress hook (egress.go): the allowlist network, and a fresh proxy built meanwhile; no
	// workload process starts before its seal is proved.
	egress, info, err = a.ensureEgress(ctx, m, info, began)
	if err != nil {
		return fail(err)
	}
	info, outcome, err := a.ensureRunning(ctx, m, info, base, imageRef, began)
	if err != nil {
		return fail(err)
	}
	pooled := outcome == outcomePooled
	if pooled {
		outcome = sandbox.OutcomeCreated // a new sandbox for its key, like a cold one
	}
	created := outcome == sandbox.OutcomeCreated
	if m.Pool == "" {
		a.b.remember(sandbox.Identity(m.Key, spec.Kind), a.name)
	}
	if err := a.checkBase(ctx, info, base); err != nil {
		return fail(err)
	}
	if err := a.prepare(ctx, spec, info, base, imageRef, created, pooled); err != nil {
		return fail(err)
	}
	if err := a.verifyEgress(ctx, egress); err != nil { // egress hook (egress.go): §1.7 checks before hand-out
		return fail(err)
	}
	if err := a.installTrust(ctx, egress, spec, info.ID); err != nil { // egress hook (egress_inspect.go)
		return fail(err)
	}
	if err := a.runProbes(ctx, info, spec, imageRef, created); err != nil {
		return fail(err)
	}
	return &acquireResponse{InstanceID: info.ID, WorkDir: base, Created: created, Outcome: outcome, ImageID: info.ImageID}
}

// found binds, reads what the engine has under the name, pre-checks its storage base and
// thaws it when a dead host left it frozen (freeze.go). nil when the name is free.
func (a *containerActor) found(ctx context.Context, base string) (*docker.ContainerInfo, error) {
	if _, err := a.b.engine.Bind(ctx); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", a.name, err)
	}
	info, err := a.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", a.name, err)
	}
	if info, err = a.recoverAside(ctx, info); err != nil || info == nil { // snapshot.go: a restore a dead engine left
		return info, err
	}
	if err := a.checkBase(ctx, info, base); err != nil {
		return nil, err
	}
	if rec, ok := a.b.sleeps.get(a.name); ok && rec.State == sleepPaused && rec.Instance == info.ID {
		if err := a.wake(ctx, sandbox.ReasonCall); err != nil { // sleep.go
			return nil, err
		}
		return a.refresh(ctx)
	}
	if info.Paused {
		return a.recoverFrozen(ctx, info)
	}
	return info, nil
}

// ensureRunning reuses a running container, or re-checks the OS and restarts a stopped one or
// creates it (not started: the outcome created says so), and reads back the instance it ended
// with. The outcome is one of sandbox.OutcomeCreated, OutcomeReused, OutcomeRestarted and
// OutcomeAdopted.
func (a *containerActor) ensureRunning(ctx context.Context, m *acquireRequest, info *docker.ContainerInfo, base, imageRef string,
	began time.Time) (_ *docker.ContainerInfo, outcome string, err error) {
	spec := m.Spec
	if info != nil && info.Running {
		a.log.Debug("sandbox reused", zap.String("kind", spec.Kind))
		return info, sandbox.OutcomeReused, nil
	}
	if info == nil && !m.Fresh { // a pool's member was made on this daemon: no OS re-check for it
		if pooled, ok := a.fromPool(ctx, m, base); ok {
			return pooled, outcomePooled, nil
		}
	}
	if err := a.recheckOS(ctx, spec, began); err != nil {
		return nil, "", err
	}
	outcome = sandbox.OutcomeRestarted
	if info != nil && info.Labels[label.Snapshot] != "" {
		imageRef = info.ImageID // a restored sandbox is replaced, if it must be, from its snapshot's image
	}
	if info != nil && a.restart(ctx, info) {
		a.log.Info("sandbox restarted", zap.String("kind", spec.Kind))
	} else {
		created, err := a.create(ctx, m.Key, spec, base, imageRef, m.Pool, began)
		if err != nil {
			return nil, "", err
		}
		outcome = sandbox.OutcomeAdopted
		if created {
			outcome = sandbox.OutcomeCreated
		}
	}
	if info, err = a.refresh(ctx); err != nil || info == nil {
		a.removeContainer(a.name)
		return nil, "", fmt.Errorf("the instance ID of %s could not be established: %w", a.name, errOrAbsent(err))
	}
	return info, outcome, nil
}

// prepare learns the instance's facts, refuses what an unresolved identity cannot serve,
// binds and prepares the storage base, and starts a container this acquire created. A
// container just created has no guest process until it starts: its facts and its storage
// base are settled first, with no freeze, on a filesystem nothing can change. A pool's
// member (pooled) is new to its key but already running, its base made when it was: the
// image's facts apply to it as to a created one, and it is not started again.
func (a *containerActor) prepare(ctx context.Context, spec sandbox.Spec, info *docker.ContainerInfo, base, imageRef string, created, pooled bool) error {
	var memo *statMemo
	if created && !pooled {
		memo = newStatMemo()
	}
	f, err := a.learnFacts(ctx, info, imageRef, base, created)
	if err != nil {
		return err
	}
	if !f.resolved {
		if err := a.refuseUnresolved(spec); err != nil {
			return err
		}
	}
	a.workDir = base
	late := false // the base is made once the container runs (makeBaseStarted)
	if spec.NeedsStorageBase() {
		if late, err = a.prepareWorkDir(ctx, info, base, f, memo, created && !pooled && a.hostAtStart(ctx)); err != nil {
			return err
		}
	}
	if !created || pooled {
		return nil
	}
	g := a.gatedWorkload()
	if g != nil { // egress hook: started now, released after the seal
		if err := a.startGated(ctx, info.ID, g); err != nil {
			return err
		}
	} else {
		if err := a.beforeStart(ctx); err != nil { // egress hook: the network's seal first
			a.removeContainer(info.ID)
			return err
		}
		if err := a.installSupervisor(ctx, info.ID); err != nil {
			a.removeContainer(info.ID)
			return err
		}
		if err := a.b.engine.Start(ctx, info.ID); err != nil {
			a.removeContainer(info.ID)
			return fmt.Errorf("docker could not start container %s: %w", a.name, err)
		}
		a.info = nil
	}
	// A gated workload's base is made too: it is handed out with its base like any other.
	if late {
		if err := a.makeBaseStarted(ctx, info, base, f); err != nil {
			a.removeContainer(info.ID)
			return err
		}
	}
	a.log.Info("sandbox created", zap.String("kind", spec.Kind), zap.String("image", imageRef), zap.Bool("gated", g != nil))
	return nil
}

// refuseUnresolved refuses the capabilities that need the guest's identity when it could not
// be established.
func (a *containerActor) refuseUnresolved(spec sandbox.Spec) error {
	req := spec.RequiredCapabilities()
	var refused []sandbox.Capability
	for _, c := range []sandbox.Capability{sandbox.FilesOut, sandbox.HostTools} {
		if req.Has(c) {
			refused = append(refused, c)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return &sandbox.CapabilityNotSupportedError{Backend: BackendName, Missing: refused, Kind: spec.Kind,
		Declared: a.b.Declarations().Capabilities, Reason: "guest access to file-plane inputs has not been established " +
			"(the guest may be unable to write outputs or host-tool markers, or empty its call directory); give the image " +
			"a numeric uid:gid user, account files the backend can read, or a working id command; the next acquire tries again"}
}

func errOrAbsent(err error) error {
	if err != nil {
		return err
	}
	return docker.ErrNotFound
}

// checkBase refuses a container recorded with a different storage base: it must be disposed
// before another base is asked of it. A container with no recorded base (the reference
// implementation records none) is the default base when that base is a directory in it, and
// is taken over for the default; one without the directory is refused like a different base.
func (a *containerActor) checkBase(ctx context.Context, info *docker.ContainerInfo, base string) error {
	recorded, ok := info.Labels[label.WorkDir]
	switch {
	case ok && recorded == base:
		return nil
	case !ok && base == DefaultWorkDir && a.baseTakenOver == info.ID:
		return nil
	case !ok && base == DefaultWorkDir:
		e, err := a.b.engine.Stat(ctx, info.ID, DefaultWorkDir)
		if err != nil {
			return fmt.Errorf("check the storage base of %s: %w", info.Name, err)
		}
		if e != nil && e.Type == docker.EntryDir {
			a.log.Info("sandbox with no recorded storage base taken over: its default base exists", zap.String("base", base))
			a.baseTakenOver = info.ID
			return nil
		}
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"container %s records no storage base and has no directory at the default base %q; dispose it before acquiring it",
			info.Name, DefaultWorkDir)}
	}
	return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
		"container %s has a different or unrecorded storage base (%q, asked %q); dispose it before requesting another base",
		info.Name, recorded, base)}
}

// recheckOS asks the daemon's OS again before anything is created or restarted, when the
// backend declared a family: the daemon behind the bound endpoint may have been replaced.
func (a *containerActor) recheckOS(ctx context.Context, spec sandbox.Spec, began time.Time) error {
	if len(a.b.osFamilies) == 0 {
		return nil
	}
	osName, err := a.b.osFlight.do(ctx, "", began, a.b.engine.ServerOS)
	if err != nil || osName == "" || osName == "linux" {
		return nil
	}
	return &sandbox.OSFamilyNotSupportedError{Backend: BackendName, Families: a.b.osFamilies, Requested: sandbox.OSPosix,
		Reason: fmt.Sprintf("the backend declared posix guests but the daemon now runs %s ones; the %q workload was refused before a container was created; "+
			"point the client back at a Linux daemon or rebuild the backend with Create", osName, spec.Kind)}
}

// restart starts a stopped container; one that will not start is removed so that it cannot
// hold the name against the create that follows.
func (a *containerActor) restart(ctx context.Context, info *docker.ContainerInfo) bool {
	err := a.beforeStart(ctx) // egress hook: the network's seal first
	if err == nil {
		err = a.releaseForRestart(ctx, info) // egress hook: a gated workload goes straight on
	}
	if err == nil {
		err = a.b.engine.Start(ctx, a.name)
	}
	if err == nil {
		a.info = nil
		return true
	}
	a.log.Info("stopped sandbox did not start; creating a replacement", zap.Error(err))
	a.removeContainer(a.name)
	return false
}

// create makes the workload container without starting it (the caller prepares it, then
// starts it), or adopts one another acquire made meanwhile. created is false when adopted.
func (a *containerActor) create(ctx context.Context, key sandbox.Key, spec sandbox.Spec, base, imageRef, pool string, began time.Time) (created bool, err error) {
	a.forget()
	// egress hook (egress_run.go): the fixed address, and the gate as entrypoint when the
	// network is still to be proved.
	egressOpts, present, err := a.workloadOpts(ctx, a.egressBuild, imageRef, func() (bool, error) {
		return a.b.imageFlight.do(ctx, imageRef, began, func(ctx context.Context) (bool, error) {
			return a.b.engine.ImageExists(ctx, imageRef)
		})
	})
	if err != nil {
		return false, fmt.Errorf("inspect image %s: %w", imageRef, err)
	}
	if !present {
		return false, &sandbox.ImageMissingError{Backend: BackendName, Image: imageRef, Hint: "build or load it on the daemon first"}
	}
	labels, err := a.labels(key, spec, base, pool)
	if err != nil {
		return false, fmt.Errorf("label container %s: %w", a.name, err)
	}
	r := spec.Resources // within the configuration's bounds: the router checked (Declarations)
	opts := append(a.b.cfg.WorkloadOpts(), docker.WithLimits(r.MemoryBytes, r.CPUs, int(r.Pids)),
		a.workloadNetwork(spec), docker.WithLabels(labels...)) // egress hook: N-net or none
	opts = append(opts, egressOpts...)
	opts = append(opts, a.supervisorOpts(ctx, imageRef)...) // exec_channel.go: closed sandboxes only
	_, err = a.b.engine.Create(ctx, docker.NewCreateSpec(a.name, imageRef, opts...))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, docker.ErrConflict) {
		info, ierr := a.refresh(ctx)
		if ierr == nil && info != nil {
			if berr := a.checkBase(ctx, info, base); berr != nil {
				return false, berr
			}
			if info.Running || a.restart(ctx, info) {
				a.log.Info("sandbox already existed; adopted", zap.String("kind", spec.Kind))
				return false, nil
			}
		}
	}
	return false, fmt.Errorf("docker could not create container %s: %w", a.name, err)
}

// outcomePooled is ensureRunning's outcome for a warm pool's member handed out (pool.go);
// the caller reports it as created.
const outcomePooled = "pooled"

// labels are the workload's labels: the key's, or a pool member's.
func (a *containerActor) labels(key sandbox.Key, spec sandbox.Spec, base, pool string) ([]label.Label, error) {
	if pool != "" {
		return label.PoolMember(pool, base)
	}
	return label.Workload(key, spec.Kind, spec.Labels, base)
}
