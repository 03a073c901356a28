package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"
)

var _ Fingerprinting = (*cliDriver)(nil)

// Changes implements [Fingerprinting] with `docker diff`.
func (c *cliDriver) Changes(ctx context.Context, id string) ([]Change, error) {
	if err := checkID("diff", id); err != nil {
		return nil, err
	}
	args := []string{"diff", id}
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fail(args, id, res)
	}
	return parseChanges(res.Stdout)
}

// confinementDoc is the part of `container inspect` [Confinement] reads.
type confinementDoc struct {
	ID    string `json:"Id"`
	State struct {
		Running   bool   `json:"Running"`
		StartedAt string `json:"StartedAt"`
	} `json:"State"`
	Config struct {
		Labels     map[string]string `json:"Labels"`
		Entrypoint []string          `json:"Entrypoint"`
	} `json:"Config"`
	HostConfig struct {
		PidMode    string `json:"PidMode"`
		Privileged bool   `json:"Privileged"`
	} `json:"HostConfig"`
	Mounts []struct {
		Type        string `json:"Type"`
		Destination string `json:"Destination"`
		RW          bool   `json:"RW"`
	} `json:"Mounts"`
	HostsPath      string `json:"HostsPath"`
	HostnamePath   string `json:"HostnamePath"`
	ResolvConfPath string `json:"ResolvConfPath"`
}

// InspectConfinement implements [Fingerprinting].
func (c *cliDriver) InspectConfinement(ctx context.Context, target string) (Confinement, error) {
	answer, err := c.inspectJSON(ctx, target)
	if err != nil {
		return Confinement{}, err
	}
	var doc confinementDoc
	if err := json.Unmarshal(answer, &doc); err != nil {
		return Confinement{}, fmt.Errorf("inspect %s: %w: %w", target, errMalformedAnswer, err)
	}
	return doc.confinement(target)
}

func (doc confinementDoc) confinement(target string) (Confinement, error) {
	if !fullID.MatchString(doc.ID) {
		return Confinement{}, fmt.Errorf("inspect %s: %w: container ID %q", target, errMalformedAnswer, doc.ID)
	}
	out := Confinement{ID: doc.ID, Running: doc.State.Running, StartedAt: doc.State.StartedAt,
		PidMode: doc.HostConfig.PidMode, Privileged: doc.HostConfig.Privileged,
		HostsPath: doc.HostsPath, HostnamePath: doc.HostnamePath, ResolvConfPath: doc.ResolvConfPath, Labels: doc.Config.Labels,
		Entrypoint: doc.Config.Entrypoint}
	for _, m := range doc.Mounts {
		out.Mounts = append(out.Mounts, MountPoint{Type: m.Type, Destination: m.Destination, RW: m.RW})
	}
	return out, nil
}

// InspectImage implements [Fingerprinting].
func (c *cliDriver) InspectImage(ctx context.Context, ref string) (ImageRecord, error) {
	if err := checkImage("image inspect", ref); err != nil {
		return ImageRecord{}, err
	}
	args := []string{"image", "inspect", "--format", "{{json .Id}} {{json .Config.Volumes}}", ref}
	res, err := c.control(ctx, args...)
	if err != nil {
		return ImageRecord{}, err
	}
	if res.ExitCode != 0 {
		return ImageRecord{}, fail(args, ref, res)
	}
	id, vols, ok := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	var rec ImageRecord
	var volumes map[string]struct{}
	if !ok || json.Unmarshal([]byte(id), &rec.ID) != nil || json.Unmarshal([]byte(vols), &volumes) != nil {
		return ImageRecord{}, fmt.Errorf("image inspect %s: %w: %q", ref, errMalformedAnswer, res.Stdout)
	}
	return rec.withVolumes(ref, volumes)
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

// RunObserver implements [Fingerprinting] with an attached `docker run --rm`, then `rm -f` of
// its name on every path: killing the client (a timeout, ctx's end) does not stop the
// container, so the removal is what ends it.
func (c *cliDriver) RunObserver(ctx context.Context, spec ObserverSpec) (out ObserverOutput, err error) {
	spec, err = spec.withLabels(c.cfg.Labels, c.cfg.CommandTimeout)
	if err != nil {
		return ObserverOutput{}, err
	}
	defer func() { err = errors.Join(err, removeObserver(ctx, c, c.log, spec.Name)) }()
	args := cliObserverRunArgs(spec)
	res, err := c.run(ctx, invocation{args: args, timeout: spec.Timeout, maxOutput: spec.MaxOutputBytes + observerStderrMax})
	if err != nil {
		return ObserverOutput{}, err
	}
	if len(res.Stdout) > int(spec.MaxOutputBytes) {
		return ObserverOutput{}, &OutputLimitError{Limit: spec.MaxOutputBytes}
	}
	// 125 is the client's own failure (the container never ran); 126 and 127 are the
	// entrypoint not running. The observer itself exits 0, 1 or 2.
	if res.ExitCode >= 125 {
		cerr := &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: classifyNetwork([]string{"create"}, spec.Name, res.Stderr)}
		return ObserverOutput{}, cerr
	}
	return ObserverOutput{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}, nil
}

// remover is the one call [removeObserver] needs.
type remover interface {
	Remove(ctx context.Context, target string) (RemoveOutcome, error)
}

// removeObserver force-removes the observer name under a context that outlives ctx's end (a
// cancelled run must still be cleaned up), bounded by the command timeout. Absent is success:
// --rm or AutoRemove may have been first, and one under way is waited out by Remove.
func removeObserver(ctx context.Context, r remover, log *zap.Logger, name string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), observerRemoveTimeout)
	defer cancel()
	if _, err := r.Remove(rctx, name); err != nil {
		log.Warn("observer container not removed", zap.String("container", name), zap.Error(err))
		return fmt.Errorf("remove observer %s: %w", name, err)
	}
	return nil
}
