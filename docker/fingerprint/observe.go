package fingerprint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/observation"
	"github.com/mafsandbox/engine/label"
)

// The observer container's run, and the comparison of two of its reports.

// observe runs the observer once and reads its report. The observer carries the role label
// and the workload's identity labels, by which the reaper takes one an engine that died left
// behind.
func (s *Subject) observe(ctx context.Context, workload docker.Confinement) (observation.Report, error) {
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	labels := []label.Label{{Key: label.Role, Value: label.RoleObserver}}
	for _, k := range label.IdentityKeys() {
		if v := workload.Labels[k]; v != "" {
			labels = append(labels, label.Label{Key: k, Value: v})
		}
	}
	spec := docker.ObserverSpec{
		Name:   ObserverNamePrefix + hex.EncodeToString(suffix),
		Image:  s.imageID,
		Target: workload.ID,
		Args: []string{"-max-bytes", strconv.FormatInt(s.limits.MaxBytes, 10),
			"-max-entries", strconv.Itoa(s.limits.MaxEntries), "-max-root-entries", strconv.Itoa(s.limits.MaxRootEntries)},
		Labels:         labels,
		MaxOutputBytes: s.maxOutput,
		Timeout:        s.timeout,
	}
	start := time.Now()
	out, err := s.eng.RunObserver(ctx, spec)
	s.log.Debug("observer ran", zap.String("observer", spec.Name), zap.Duration("elapsed", time.Since(start)),
		zap.Int("exit_code", out.ExitCode), zap.Error(err))
	if err != nil {
		if errors.Is(err, docker.ErrOutputLimit) {
			err = fmt.Errorf("%w: %w", ErrLimit, err)
		}
		return observation.Report{}, &UnreadableError{What: "the observation", Err: err}
	}
	if out.ExitCode != 0 {
		msg := strings.TrimSpace(string(out.Stderr))
		var cause error = errors.New(msg)
		switch out.ExitCode {
		case observation.ExitLimit:
			cause = fmt.Errorf("%w: %s", ErrLimit, msg)
		case observation.ExitUnobservable:
			return observation.Report{}, &RefusedError{Reason: "the observer refused a writable mount: " + msg}
		}
		return observation.Report{}, &UnreadableError{What: fmt.Sprintf("the observation (observer exited %d)", out.ExitCode), Err: cause}
	}
	var r observation.Report
	if err := json.Unmarshal(out.Stdout, &r); err != nil {
		return r, &UnreadableError{What: "the observer's report", Err: err}
	}
	if r.Version != observation.Version {
		return r, &UnreadableError{What: "the observer's report", Err: fmt.Errorf("format %d, want %d", r.Version, observation.Version)}
	}
	if r.Entries == nil || r.RootEntries == nil {
		return r, &UnreadableError{What: "the observer's report", Err: errors.New("it has no entries")}
	}
	return r, nil
}

// managedFiles maps each engine-managed mount point to its file name in the engine's
// container directory.
var managedFiles = map[string]func(docker.Confinement) string{
	"/etc/hosts":       func(c docker.Confinement) string { return c.HostsPath },
	"/etc/hostname":    func(c docker.Confinement) string { return c.HostnamePath },
	"/etc/resolv.conf": func(c docker.Confinement) string { return c.ResolvConfPath },
}

// verifiedManagedMounts returns the engine-managed mount points that are what the engine says
// they are: a mount at that path, of a file whose source is the inspect's path for it in this
// container's own directory (the mount's root is that host path, or its tail when the
// engine's data root is a filesystem of its own).
func verifiedManagedMounts(c docker.Confinement, mounts []observation.Mount) map[string]bool {
	byPath := map[string]observation.Mount{}
	for _, m := range mounts {
		byPath[m.Path] = m
	}
	out := map[string]bool{}
	for p, hostPath := range managedFiles {
		host := hostPath(c)
		m, ok := byPath[p]
		if !ok || host == "" || m.Root == "" || m.Root == "/" {
			continue
		}
		if strings.HasSuffix(host, m.Root) && path.Base(path.Dir(m.Root)) == c.ID && path.Base(m.Root) == path.Base(host) {
			out[p] = true
		}
	}
	return out
}

// differingEntries yields every path present in only one of a and b, or for which same says
// its two measurements differ.
func differingEntries(a, b map[string]observation.Entry, same func(p string, a, b observation.Entry) bool) map[string]bool {
	out := map[string]bool{}
	for p, ea := range a {
		if eb, ok := b[p]; !ok || !same(p, ea, eb) {
			out[p] = true
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out[p] = true
		}
	}
	return out
}

// sameMounted compares a mounted entry in full, but for the ctime of the paths of noCtime.
func sameMounted(noCtime map[string]bool) func(p string, a, b observation.Entry) bool {
	return func(p string, a, b observation.Entry) bool {
		if noCtime[p] {
			a, b = a.WithoutCtime(), b.WithoutCtime()
		}
		return a == b
	}
}

// sameRoot compares a root filesystem entry by [observation.SameRootEntry]. The engine's
// change list alone does not do: Docker's naive differ (every storage driver but overlay2)
// compares a file's size and mtime only, which a call can keep while it rewrites the file.
func sameRoot(_ string, a, b observation.Entry) bool { return observation.SameRootEntry(a, b) }
