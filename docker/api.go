package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// Engine is the driver of one Docker engine: it speaks the Engine API to the endpoint the
// bound context resolved to (see [Engine.Bind]), with the Docker project's own Go client
// (github.com/moby/moby/client), over a unix socket, tcp with the context's TLS material, or
// ssh through `docker system dial-stdio` on the remote host (dial_ssh.go). Control calls run
// under Config.CommandTimeout; exec runs under the caller's context only; the tar plane and
// exec output are bounded.
//
// No goroutine, connection or ssh process outlives the call that started it: keep-alives are
// off, every response body and hijacked connection is closed before the method returns, and the
// only goroutines that stay are an [Engine.Events] stream's, until its context ends.
//
// Answers are classified by their HTTP status class (containerd errdefs), never their text;
// the few statuses that mean several things (409) are settled by inspecting the container.
// [*CommandError] values it returns carry the HTTP status in ExitCode. It is safe for
// concurrent use.
type Engine struct {
	cfg   Config
	log   *zap.Logger
	inst  instruments
	env   []string
	bound *bindOnce[apiBound]
}

// NewEngine returns the driver of the Docker engine the client's context resolves to, with cfg
// (zero fields take their defaults) and opts. It snapshots the process environment: binding
// and every later call see that snapshot, never the live environment. It makes no engine call;
// the context is bound on first use (or [Engine.Bind]). It fails with [ErrInvalid] for a
// configuration no call could honour (for example a label under label.Prefix).
func NewEngine(cfg Config, opts ...Option) (*Engine, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Engine{
		cfg:   cfg,
		log:   o.log.Named("docker"),
		inst:  newInstruments(o),
		env:   os.Environ(),
		bound: newBindOnce[apiBound](),
	}, nil
}

// Config returns the configuration the engine runs with, defaults filled in.
func (a *Engine) Config() Config { return a.cfg.withDefaults() }

// errControlBudget is the cause of a control call's own deadline.
var errControlBudget = errors.New("docker: control call budget spent")

// control runs fn, a short control call named like the docker command it stands for, under
// Config.CommandTimeout: its expiry is a [*TimeoutError], the caller's cancellation or deadline
// ctx's error, wrapped.
func (a *Engine) control(ctx context.Context, args []string, fn func(ctx context.Context, b *apiBound) error) error {
	end := func(error) time.Duration { return 0 }
	if args[0] != "exec" { // an exec's control call only binds: API.exec observes the whole run
		ctx, end = a.inst.begin(ctx, args[0])
	}
	start := time.Now()
	if err := ctx.Err(); err != nil {
		end(err)
		return fmt.Errorf("docker %s: %w", args[0], err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, a.cfg.CommandTimeout, errControlBudget)
	defer cancel()
	cctx, witness := withSSHWitness(cctx)
	b, err := a.ready(cctx)
	if err == nil {
		err = fn(cctx, b)
	}
	err = a.settle(ctx, cctx, args, witness.settle(args[0], err))
	end(err)
	a.log.Debug("docker api call", zap.String("op", args[0]), zap.Strings("args", firstArgs(args)),
		zap.Duration("elapsed", time.Since(start)), zap.Error(err))
	return err
}

// query asks the engine one question under [Engine.control] and reads its answer: ask's refusal
// is classified under args ([apiError]), and read's error is the call's as it is. It is the
// shape of every read-only call whose answer is one document or list.
func query[R, T any](ctx context.Context, a *Engine, args []string, ask func(context.Context, *client.Client) (R, error),
	read func(R) (T, error)) (T, error) {
	var out T
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := ask(ctx, b.client)
		if err != nil {
			return apiError(args, err, nil)
		}
		out, err = read(res)
		return err
	})
	return out, err
}

// settle turns the end of ctx or of the control budget into the call's error: ctx's own,
// wrapped, or a [*TimeoutError].
func (a *Engine) settle(ctx, cctx context.Context, args []string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("docker %s: %w", args[0], ctx.Err())
	}
	if errors.Is(context.Cause(cctx), errControlBudget) {
		return &TimeoutError{Args: args, Timeout: a.cfg.CommandTimeout}
	}
	return err
}

// Inspect implements [Containers].
func (a *Engine) Inspect(ctx context.Context, target string) (ContainerInfo, error) {
	if err := checkTarget(target); err != nil {
		return ContainerInfo{}, fmt.Errorf("inspect: %w", err)
	}
	var info ContainerInfo
	err := a.control(ctx, []string{"container", "inspect", target}, func(ctx context.Context, b *apiBound) error {
		var err error
		info, err = b.inspect(ctx, target)
		return err
	})
	return info, err
}

// inspect is one container inspect, as [ContainerInfo].
func (b *apiBound) inspect(ctx context.Context, target string) (ContainerInfo, error) {
	args := []string{"container", "inspect", target}
	res, err := b.client.ContainerInspect(ctx, target, client.ContainerInspectOptions{})
	if err != nil {
		return ContainerInfo{}, apiError(args, err, nil)
	}
	doc := res.Container
	if doc.ID == "" {
		return ContainerInfo{}, fmt.Errorf("inspect %s: answer without an ID", target)
	}
	info := ContainerInfo{
		ID:       doc.ID,
		Name:     strings.TrimPrefix(doc.Name, "/"),
		ImageID:  doc.Image,
		Labels:   map[string]string{},
		Networks: map[string]string{},
	}
	if doc.State != nil {
		info.Status = string(doc.State.Status)
		info.Running, info.Paused, info.ExitCode = doc.State.Running, doc.State.Paused, doc.State.ExitCode
		info.Pid = doc.State.Pid
		if t, err := time.Parse(time.RFC3339Nano, doc.State.StartedAt); err == nil {
			info.StartedAt = t
		}
	}
	if doc.Config != nil {
		info.Image = doc.Config.Image
		info.User = strings.TrimSpace(doc.Config.User)
		info.Entrypoint, info.Cmd = doc.Config.Entrypoint, doc.Config.Cmd
		if doc.Config.Labels != nil {
			info.Labels = doc.Config.Labels
		}
	}
	if doc.HostConfig != nil {
		info.CapDrop = doc.HostConfig.CapDrop
		info.CapAdd = doc.HostConfig.CapAdd
	}
	if doc.NetworkSettings != nil {
		for name, n := range doc.NetworkSettings.Networks {
			if n != nil {
				info.Networks[name] = n.NetworkID
			} else {
				info.Networks[name] = ""
			}
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, doc.Created); err == nil {
		info.Created = t
	}
	return info, nil
}

// ImageExists implements [Containers].
func (a *Engine) ImageExists(ctx context.Context, image string) (bool, error) {
	if err := checkImage("image exists", image); err != nil {
		return false, err
	}
	args := []string{"image", "inspect", image}
	present := false
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.ImageInspect(ctx, image)
		switch {
		case err == nil:
			present = true
			return nil
		case isAnswer(err) && cerrdefs.IsNotFound(err):
			return nil
		}
		return apiError(args, err, nil)
	})
	return present, err
}

// ImageEntrypoint implements [Containers].
func (a *Engine) ImageEntrypoint(ctx context.Context, image string) ([]string, bool, error) {
	if err := checkImage("image entrypoint", image); err != nil {
		return nil, false, err
	}
	args := []string{"image", "inspect", image}
	var (
		ep      []string
		present bool
	)
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ImageInspect(ctx, image)
		switch {
		case err == nil:
			present = true
			if res.Config != nil {
				ep = append([]string(nil), res.Config.Entrypoint...)
			}
			return nil
		case isAnswer(err) && cerrdefs.IsNotFound(err):
			return nil
		}
		return apiError(args, err, nil)
	})
	return ep, present, err
}

// Run creates and starts a workload container from spec and returns its ID, as Create then
// Start; errors as Create. A run whose start failed can leave the created container behind
// under spec.Name. Config.Labels are written after the spec's.
func (a *Engine) Run(ctx context.Context, spec CreateSpec) (string, error) {
	return a.make(ctx, spec, true)
}

// Create implements [Containers].
func (a *Engine) Create(ctx context.Context, spec CreateSpec) (string, error) {
	return a.make(ctx, spec, false)
}

func (a *Engine) make(ctx context.Context, spec CreateSpec, start bool) (string, error) {
	labels, err := mergeLabels(spec.Labels, a.cfg.Labels)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	if err := spec.validate(); err != nil {
		return "", err
	}
	opts, err := apiCreateOptions(spec)
	if err != nil {
		return "", err
	}
	args := cliCreateArgs(spec)
	if start {
		args = cliRunArgs(spec)
	}
	var id string
	err = a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ContainerCreate(ctx, opts)
		if err != nil {
			var class error
			if isAnswer(err) && cerrdefs.IsConflict(err) {
				class = ErrConflict
			}
			return apiError(args, err, class)
		}
		if res.ID == "" {
			return fmt.Errorf("create container %s: the engine returned no container ID", spec.Name)
		}
		id = res.ID
		if !start {
			return nil
		}
		if _, err := b.client.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
			return apiError(args, err, nil)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// Start implements [Containers].
func (a *Engine) Start(ctx context.Context, target string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	args := []string{"start", target}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		if _, err := b.client.ContainerStart(ctx, target, client.ContainerStartOptions{}); err != nil {
			return apiError(args, err, nil)
		}
		return nil
	})
}

// Remove implements [Containers]: a forced removal, volumes kept, as `rm -f`, waiting out one
// already under way ([removeForced]).
func (a *Engine) Remove(ctx context.Context, target string) (RemoveOutcome, error) {
	if err := checkTarget(target); err != nil {
		return 0, fmt.Errorf("remove: %w", err)
	}
	return removeForced(ctx, func(ctx context.Context) (RemoveOutcome, error) {
		return a.remove(ctx, []string{"rm", "-f", target}, func(ctx context.Context, b *apiBound) error {
			_, err := b.client.ContainerRemove(ctx, target, client.ContainerRemoveOptions{Force: true})
			return err
		})
	})
}

// remove runs one removal call: done is [Removed], the daemon's "not found" is [Absent], any
// other error is classified as args' command.
func (a *Engine) remove(ctx context.Context, args []string, call func(context.Context, *apiBound) error) (RemoveOutcome, error) {
	var outcome RemoveOutcome
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		err := call(ctx, b)
		switch {
		case err == nil:
			outcome = Removed
			return nil
		case isAnswer(err) && cerrdefs.IsNotFound(err):
			outcome = Absent
			return nil
		case args[0] == "rm" && isAnswer(err) && cerrdefs.IsConflict(err):
			// A forced removal conflicts only with a removal already under way (20.10's
			// ContainerRm: "removal of container … is already in progress").
			return apiError(args, err, errRemovalInProgress)
		case args[0] == "rm" && isAnswer(err) && cerrdefs.IsInternal(err):
			// The daemon's own failure to release the container's layer: worth asking again.
			return apiError(args, err, errRemovalIncomplete)
		}
		return apiError(args, err, nil)
	})
	if err != nil {
		return 0, err
	}
	return outcome, nil
}

// Pause implements [Containers]. The daemon answers both "already paused" and "not running" with
// the same status (409 on 20.10), and a freezer that gave up with a 500; the container's state
// says which (pauseClass).
func (a *Engine) Pause(ctx context.Context, target string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	args := []string{"pause", target}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.ContainerPause(ctx, target, client.ContainerPauseOptions{})
		if err == nil {
			return nil
		}
		if !isAnswer(err) || cerrdefs.IsNotFound(err) {
			return apiError(args, err, nil)
		}
		info, ierr := b.inspect(ctx, target)
		if ierr != nil {
			return apiError(args, err, nil)
		}
		return apiFailure(args, err, pauseClass(err, info.Paused, info.Running))
	})
}

// Rename implements [Containers].
func (a *Engine) Rename(ctx context.Context, target, newName string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	if err := checkTarget(newName); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	args := []string{"rename", target, newName}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.ContainerRename(ctx, target, client.ContainerRenameOptions{NewName: newName})
		if err == nil {
			return nil
		}
		var class error
		if isAnswer(err) && cerrdefs.IsConflict(err) {
			class = ErrConflict
		}
		return apiError(args, err, class)
	})
}

// Unpause implements [Containers]. A refusal is "not paused" when the container's state agrees
// (20.10 answers it with a 500, not a 409, so no status can say it); absence is a lifted freeze
// too.
func (a *Engine) Unpause(ctx context.Context, target string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("unpause: %w", err)
	}
	args := []string{"unpause", target}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.ContainerUnpause(ctx, target, client.ContainerUnpauseOptions{})
		switch {
		case err == nil:
			return nil
		case isAnswer(err) && cerrdefs.IsNotFound(err):
			a.log.Debug("unpause found nothing to lift", zap.String("container", target), zap.Error(err))
			return nil
		case !isAnswer(err):
			return apiError(args, err, nil)
		}
		info, ierr := b.inspect(ctx, target)
		if errors.Is(ierr, ErrNotFound) || (ierr == nil && !info.Paused) {
			a.log.Debug("unpause found nothing to lift", zap.String("container", target), zap.Error(err))
			return nil
		}
		return apiFailure(args, err, nil)
	})
}
