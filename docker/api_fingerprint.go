package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/go-units"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

var _ Fingerprinting = (*Engine)(nil)

// Changes implements [Fingerprinting] with the container changes endpoint (GET
// /containers/{id}/changes), which `docker diff` prints.
func (a *Engine) Changes(ctx context.Context, id string) ([]Change, error) {
	if err := checkID("diff", id); err != nil {
		return nil, err
	}
	return query(ctx, a, []string{"diff", id},
		func(ctx context.Context, c *client.Client) (client.ContainerDiffResult, error) {
			return c.ContainerDiff(ctx, id, client.ContainerDiffOptions{})
		}, apiChanges)
}

// apiChanges maps the engine's change list to [Change]s, refusing a kind it does not know.
func apiChanges(res client.ContainerDiffResult) ([]Change, error) {
	var changes []Change
	for _, ch := range res.Changes {
		kind, ok := map[container.ChangeType]ChangeKind{
			container.ChangeAdd: ChangeAdded, container.ChangeModify: ChangeModified, container.ChangeDelete: ChangeDeleted,
		}[ch.Kind]
		if !ok {
			return nil, fmt.Errorf("%w: change kind %d of %q", errMalformedAnswer, ch.Kind, ch.Path)
		}
		c, err := newChange(string(kind), ch.Path)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// InspectConfinement implements [Fingerprinting].
func (a *Engine) InspectConfinement(ctx context.Context, target string) (Confinement, error) {
	if err := checkTarget(target); err != nil {
		return Confinement{}, fmt.Errorf("inspect: %w", err)
	}
	return query(ctx, a, []string{"container", "inspect", target},
		func(ctx context.Context, c *client.Client) (client.ContainerInspectResult, error) {
			return c.ContainerInspect(ctx, target, client.ContainerInspectOptions{})
		},
		func(res client.ContainerInspectResult) (Confinement, error) {
			return apiConfinement(target, res.Container)
		})
}

// apiConfinement reads the inspect of target as a [Confinement], refusing an answer without a
// full container ID, a state or a host configuration.
func apiConfinement(target string, doc container.InspectResponse) (Confinement, error) {
	if !fullID.MatchString(doc.ID) {
		return Confinement{}, fmt.Errorf("inspect %s: %w: container ID %q", target, errMalformedAnswer, doc.ID)
	}
	if doc.State == nil || doc.HostConfig == nil {
		return Confinement{}, fmt.Errorf("inspect %s: %w: no state or host configuration", target, errMalformedAnswer)
	}
	out := Confinement{ID: doc.ID, Running: doc.State.Running, StartedAt: doc.State.StartedAt,
		PidMode: string(doc.HostConfig.PidMode), Privileged: doc.HostConfig.Privileged,
		HostsPath: doc.HostsPath, HostnamePath: doc.HostnamePath, ResolvConfPath: doc.ResolvConfPath}
	if doc.Config != nil {
		out.Labels, out.Entrypoint = doc.Config.Labels, doc.Config.Entrypoint
	}
	for _, m := range doc.Mounts {
		out.Mounts = append(out.Mounts, MountPoint{Type: string(m.Type), Destination: m.Destination, RW: m.RW})
	}
	return out, nil
}

// InspectImage implements [Fingerprinting].
func (a *Engine) InspectImage(ctx context.Context, ref string) (ImageRecord, error) {
	if err := checkImage("image inspect", ref); err != nil {
		return ImageRecord{}, err
	}
	return query(ctx, a, []string{"image", "inspect", ref},
		func(ctx context.Context, c *client.Client) (client.ImageInspectResult, error) {
			return c.ImageInspect(ctx, ref)
		},
		func(res client.ImageInspectResult) (ImageRecord, error) {
			var volumes map[string]struct{}
			if res.Config != nil {
				volumes = res.Config.Volumes
			}
			return ImageRecord{ID: res.ID}.withVolumes(ref, volumes)
		})
}

func (rec ImageRecord) withVolumes(ref string, volumes map[string]struct{}) (ImageRecord, error) {
	if !imageID.MatchString(rec.ID) {
		return ImageRecord{}, fmt.Errorf("image inspect %s: %w: image ID %q", ref, errMalformedAnswer, rec.ID)
	}
	for v := range volumes {
		rec.Volumes = append(rec.Volumes, v)
	}
	return rec, nil
}

// apiObserverCreateOptions renders spec as the create request of [cliObserverRunArgs],
// removed by the daemon when it exits as --rm is.
func apiObserverCreateOptions(spec ObserverSpec) (client.ContainerCreateOptions, error) {
	mem, err := units.RAMInBytes(observerMemory)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	pids := int64(observerPidsLimit)
	cfg := &container.Config{
		Image:        spec.Image,
		User:         "0:0",
		Cmd:          append([]string(nil), spec.Args...),
		Labels:       labelMap(spec.Labels),
		AttachStdout: true,
		AttachStderr: true,
	}
	hc := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		CapAdd:         []string{"SYS_PTRACE"},
		SecurityOpt:    []string{"no-new-privileges"},
		PidMode:        container.PidMode("container:" + spec.Target),
		// The daemon removes it when it exits, as `docker run --rm` does, so an engine killed
		// while it runs leaves no stopped observer behind.
		AutoRemove: true,
	}
	hc.PidsLimit = &pids
	hc.Memory = mem
	return client.ContainerCreateOptions{Name: spec.Name, Config: cfg, HostConfig: hc}, nil
}

// errObserverBudget is the cause of an observer run's own deadline.
var errObserverBudget = errors.New("docker: observer run budget spent")

// RunObserver implements [Fingerprinting]: create, attach, start, read both streams to their
// end, wait for the exit code; the container is force-removed on every path, under a context
// that outlives ctx.
func (a *Engine) RunObserver(ctx context.Context, spec ObserverSpec) (out ObserverOutput, err error) {
	spec, err = spec.withLabels(a.cfg.Labels, a.cfg.CommandTimeout)
	if err != nil {
		return ObserverOutput{}, err
	}
	opts, err := apiObserverCreateOptions(spec)
	if err != nil {
		return ObserverOutput{}, fmt.Errorf("run observer %s: %w", spec.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return ObserverOutput{}, fmt.Errorf("docker run: %w", err)
	}
	defer func() { err = errors.Join(err, removeObserver(ctx, a, spec.Name)) }()
	args := cliObserverRunArgs(spec)
	start := time.Now()
	rctx, cancel := context.WithTimeoutCause(ctx, spec.Timeout, errObserverBudget)
	defer cancel()
	rctx, witness := withSSHWitness(rctx)
	b, err := a.ready(rctx)
	if err == nil {
		out, err = b.runObserver(rctx, args, opts, spec.MaxOutputBytes)
	}
	err = witness.settle("run", err)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("docker run: %w", ctx.Err())
		} else if errors.Is(context.Cause(rctx), errObserverBudget) {
			err = &TimeoutError{Args: args, Timeout: spec.Timeout}
		}
	}
	a.inst.metrics.DaemonCall(ctx, "run", time.Since(start), err)
	a.log.Debug("docker api call", zap.String("op", "run"), zap.String("container", spec.Name),
		zap.Duration("elapsed", time.Since(start)), zap.Error(err))
	return out, err
}

func (b *apiBound) runObserver(ctx context.Context, args []string, opts client.ContainerCreateOptions, maxStdout int64) (ObserverOutput, error) {
	created, err := b.client.ContainerCreate(ctx, opts)
	if err != nil {
		var class error
		if isAnswer(err) && cerrdefs.IsConflict(err) {
			class = ErrConflict
		} else if isAnswer(err) && cerrdefs.IsNotFound(err) {
			class = ErrImageMissing
		}
		return ObserverOutput{}, apiError(args, err, class)
	}
	att, err := b.client.ContainerAttach(ctx, created.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return ObserverOutput{}, apiError(args, err, nil)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	// Asked before the start, as `docker run --rm` does: the daemon removes the container
	// when it exits, and a wait asked after that finds nothing to wait on.
	waited := b.client.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	if _, err := b.client.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return ObserverOutput{}, apiError(args, err, nil)
	}
	stdout := &boundedBuffer{max: int(maxStdout)}
	stderr := &boundedBuffer{max: observerStderrMax}
	_, cerr := stdcopy.StdCopy(stdout, stderr, att.Reader)
	switch {
	case ctx.Err() != nil:
		return ObserverOutput{}, ctx.Err()
	case errors.Is(cerr, errLogsFull) && stdout.buf.Len() >= int(maxStdout):
		return ObserverOutput{}, &OutputLimitError{Limit: maxStdout}
	case cerr != nil && !errors.Is(cerr, errLogsFull):
		return ObserverOutput{}, fmt.Errorf("%w: docker run: the output stream broke: %w", ErrUnreachable, cerr)
	}
	select {
	case res := <-waited.Result:
		if res.Error != nil {
			return ObserverOutput{}, fmt.Errorf("docker run: wait: %s", res.Error.Message)
		}
		return ObserverOutput{ExitCode: int(res.StatusCode), Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes()}, nil
	case err := <-waited.Error:
		return ObserverOutput{}, apiError(args, err, nil)
	}
}

// removeObserver force-removes the observer name under a context that outlives ctx's end (a
// cancelled run must still be cleaned up), bounded by the command timeout. Absent is success:
// AutoRemove may have been first, and one under way is waited out by Remove.
func removeObserver(ctx context.Context, e *Engine, name string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), observerRemoveTimeout)
	defer cancel()
	if _, err := e.Remove(rctx, name); err != nil {
		e.log.Warn("observer container not removed", zap.String("container", name), zap.Error(err))
		return fmt.Errorf("remove observer %s: %w", name, err)
	}
	return nil
}
