package actors

// Snapshots: a sandbox's filesystem recorded as the changes against its image, restored or
// forked by loading an image of the snapshot (the sandbox's image plus the snapshot's layer)
// and creating containers from it.
//
//   - take (snapshotRequest, on the container's actor): the container is held still (frozen
//     unless it sleeps or is stopped), the daemon's change list read, the layer written
//     (snapshot_layer.go) to the store as it is read, then the record: the snapshot exists once
//     its record does. A failure removes what was stored.
//   - restore and fork (Backend.Restore, Backend.Fork): the record read, the image the
//     snapshot is relative to checked on this daemon (its digest named when missing), the
//     snapshot's image made once: its configuration is the local image's plus a label naming
//     the snapshot, its layers the image's plus the snapshot's, so its ID is the digest of
//     what this daemon holds, the same for every sandbox restored here. If the daemon lacks it,
//     it is loaded (`docker load`) from the layer streamed out of the store and checked on the
//     way (checkLayer): the daemon unpacks nothing before the archive ends, and a layer that
//     fails a check or does not match its record's digest ends the archive with an error, so
//     nothing of it is loaded. Then the sandbox is acquired as usual with the snapshot's image,
//     as a new instance: a restore after removing the key's old one; a fork for keys that have
//     none, all at once, removing them all if one fails.
//   - the snapshot's image stays while containers use it; deleting the snapshot removes it
//     from this daemon when no container uses it any more, and so does disposing the last
//     sandbox restored from it through this engine. It carries label.Snapshot, and is untagged.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// snapshotSeam is what snapshots need of the driver: the change list and the snapshot calls.
type snapshotSeam interface {
	docker.Snapshotting
	Changes(ctx context.Context, id string) ([]docker.Change, error)
}

// snapshots returns the driver's snapshot calls and the store, or why there are none.
func (b *Backend) snapshots() (snapshotSeam, SnapshotStore, error) {
	if b.snapStore == nil {
		return nil, nil, &sandbox.UnsupportedError{Backend: BackendName, Op: "snapshots",
			Reason: "the backend keeps no snapshots: give it a store (actors.WithSnapshotStore)"}
	}
	sn, ok := b.engine.Driver.(docker.Snapshotting)
	fp, ok2 := b.engine.Driver.(docker.Fingerprinting)
	if !ok || !ok2 {
		return nil, nil, &sandbox.UnsupportedError{Backend: BackendName, Op: "snapshots",
			Reason: "the engine's driver cannot read a container's changes or load images"}
	}
	return struct {
		docker.Snapshotting
		docker.Fingerprinting
	}{sn, fp}, b.snapStore, nil
}

// DefaultUnfinishedSnapshotAge is [WithUnfinishedSnapshotAge]'s default.
const DefaultUnfinishedSnapshotAge = 15 * time.Minute

// sweepSnapshots undoes, in the background, the snapshots an engine died writing: a layer
// with no record, older than the unfinished age, is removed and said so. A record is written
// last, so such a layer was never a snapshot anyone was handed.
func (b *Backend) sweepSnapshots() {
	_, store, err := b.snapshots()
	if err != nil {
		return
	}
	b.sweeps.Add(1)
	go func() {
		defer b.sweeps.Done()
		ctx, cancel := context.WithTimeout(b.life, time.Minute)
		defer cancel()
		ids, err := store.Unfinished(ctx, time.Now().Add(-b.unfinished))
		if err != nil {
			b.log.Warn("list unfinished snapshots", zap.Error(err))
			return
		}
		for _, id := range ids {
			if err := store.Delete(ctx, id); err != nil {
				b.log.Warn("undo an unfinished snapshot", zap.String("snapshot", id), zap.Error(err))
				continue
			}
			b.log.Info("undid a snapshot its engine did not finish: its layer had no record", zap.String("snapshot", id))
		}
	}()
}

// snapshotCaps are the capabilities a backend with snapshots declares.
func (b *Backend) snapshotCaps(caps sandbox.CapabilitySet) {
	if _, _, err := b.snapshots(); err == nil {
		caps[sandbox.SnapshotFiles] = struct{}{}
		caps[sandbox.Fork] = struct{}{}
	}
}

// snapshotRequest records the instance's filesystem.
type snapshotRequest struct {
	InstanceID string
}

type snapshotResponse struct {
	Info sandbox.SnapshotInfo
	Err  error
}

// needsFreeze is true: a snapshot of a running guest reads it frozen, so it waits for an exec
// that may still be starting.
func (*snapshotRequest) needsFreeze() bool  { return true }
func (*snapshotRequest) fail(err error) any { return &snapshotResponse{Err: err} }

func (m *snapshotRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	info, err := a.snapshot(ctx, m)
	reply(&snapshotResponse{Info: info, Err: err})
}

// Snapshot implements [sandbox.Snapshottable]: the sandbox's filesystem now, as the changes
// against its image ([sandbox.SnapshotHolds]), kept in the backend's store. A running sandbox
// is frozen while it is read; a sleeping or stopped one is read as it is.
func (s *Sandbox) Snapshot(ctx context.Context) (sandbox.SnapshotInfo, error) {
	res, err := ask[*snapshotResponse](ctx, s.b, s.name, s.pid, s.envelope(&snapshotRequest{InstanceID: s.inst().id}), 0)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	return res.Info, res.Err
}

func (a *containerActor) snapshot(ctx context.Context, m *snapshotRequest) (sandbox.SnapshotInfo, error) {
	seam, store, err := a.b.snapshots()
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	target, err := a.target(m.InstanceID)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	info, err := a.refresh(ctx)
	if err != nil || info == nil || (m.InstanceID != "" && info.ID != m.InstanceID) {
		return sandbox.SnapshotInfo{}, a.vanished(m.InstanceID, errOrAbsent(err))
	}
	began := time.Now()
	rec := sandbox.SnapshotInfo{ID: newSnapshotID(), Key: a.sleeper.key, Kind: a.sleeper.kind, Backend: BackendName,
		InstanceID: info.ID, Image: info.ImageID, Reason: sandbox.ActReason(ctx)}
	if rec.Kind == "" {
		rec.Kind = info.Labels[label.Kind]
	}
	read := func(ctx context.Context) error { return a.writeSnapshot(ctx, seam, store, info.ID, &rec) }
	if info.Running && !info.Paused && !a.asleepOn(target) {
		err = a.frozen(ctx, target, read)
	} else {
		err = read(ctx) // nothing of the guest runs: nothing to hold still
	}
	if err == nil {
		rec.Created = time.Now().UTC()
		err = store.PutRecord(ctx, rec)
	}
	if err != nil {
		if derr := store.Delete(context.WithoutCancel(ctx), rec.ID); derr != nil {
			a.log.Warn("remove an unfinished snapshot", zap.String("snapshot", rec.ID), zap.Error(derr))
		}
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", a.name, err)
	}
	took := time.Since(began)
	a.log.Info("snapshot taken", zap.String("snapshot", rec.ID), zap.Int64("bytes", rec.Bytes), zap.Int("entries", rec.Entries),
		zap.Duration("elapsed", took))
	if obs := a.b.reporter(ctx); obs != nil {
		obs.SnapshotTaken(ctx, sandbox.SnapshotTaken{Act: sandbox.Act{Key: rec.Key, Kind: rec.Kind, Backend: BackendName,
			InstanceID: rec.InstanceID, Took: took}, Snapshot: rec})
	}
	return rec, nil
}

// writeSnapshot reads the container's changes and streams its layer into the store,
// completing rec with the layer's digest, size and entries.
func (a *containerActor) writeSnapshot(ctx context.Context, seam snapshotSeam, store SnapshotStore, id string, rec *sandbox.SnapshotInfo) error {
	changes, err := seam.Changes(ctx, id)
	if err != nil {
		return fmt.Errorf("read its changes: %w", err)
	}
	plan, err := planLayer(ctx, changes, func(ctx context.Context, p string) (bool, error) {
		e, err := a.b.engine.StatType(ctx, id, p)
		if err != nil {
			return false, err
		}
		return e != nil && e.Type == docker.EntryDir, nil
	})
	if err != nil {
		return err
	}
	archive := func(ctx context.Context, p string) (io.ReadCloser, error) { return seam.Archive(ctx, id, p) }
	pr, pw := io.Pipe()
	digest := sha256.New()
	counted := &countWriter{w: io.MultiWriter(pw, digest)}
	var st layerStats
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		st, err = writeLayer(ctx, counted, plan, archive)
		pw.CloseWithError(err)
	}()
	err = store.PutLayer(ctx, rec.ID, pr)
	pr.CloseWithError(errors.Join(err, io.ErrClosedPipe)) // a writer still writing stops
	wg.Wait()
	if err != nil {
		return err
	}
	rec.Layer, rec.Bytes, rec.Entries = "sha256:"+hex.EncodeToString(digest.Sum(nil)), counted.n, st.entries
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// DescribeSnapshot implements [sandbox.SnapshotKeeper].
func (b *Backend) DescribeSnapshot(ctx context.Context, id string) (sandbox.SnapshotInfo, error) {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	_, store, err := b.snapshots()
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	return store.Record(ctx, id)
}

// Snapshots implements [sandbox.SnapshotKeeper].
func (b *Backend) Snapshots(ctx context.Context, scope, threadID string) ([]sandbox.SnapshotInfo, error) {
	_, store, err := b.snapshots()
	if err != nil {
		return nil, err
	}
	return store.Records(ctx, scope, threadID)
}

// DeleteSnapshot implements [sandbox.SnapshotKeeper]: the record and the layer go, and the
// snapshot's image on this daemon when no container uses it.
func (b *Backend) DeleteSnapshot(ctx context.Context, id string) error {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return err
	}
	seam, store, err := b.snapshots()
	if err != nil {
		return err
	}
	if rec, err := store.Record(ctx, id); err == nil {
		if img, err := b.snapshotImageID(ctx, seam, rec); err == nil {
			b.releaseSnapshotImage(ctx, img)
		}
	}
	return store.Delete(ctx, id)
}

// releaseSnapshotImage removes a snapshot's image when no container uses it; one in use stays.
func (b *Backend) releaseSnapshotImage(ctx context.Context, image string) {
	seam, _, err := b.snapshots()
	if err != nil {
		return
	}
	out, err := seam.RemoveImage(ctx, image)
	switch {
	case errors.Is(err, docker.ErrConflict):
		b.log.Debug("snapshot image still in use; kept", zap.String("image", image))
	case err != nil:
		b.log.Warn("remove snapshot image", zap.String("image", image), zap.Error(err))
	case out == docker.Removed:
		b.log.Info("snapshot image removed", zap.String("image", image))
	}
}

// snapshotImageOf is the snapshot image info's container runs, "" when it runs no snapshot's
// image (or nothing is known of it).
func (a *containerActor) snapshotImageOf(info *docker.ContainerInfo) string {
	if info == nil || info.Labels[label.Snapshot] == "" {
		return ""
	}
	return info.ImageID
}

// releaseImage removes a snapshot's image after a disposal removed a container of it, when
// no other container uses it.
func (a *containerActor) releaseImage(ctx context.Context, img string, res *disposeResponse) {
	if img == "" || res.Failure != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.b.commandTimeout())
	defer cancel()
	a.b.releaseSnapshotImage(ctx, img)
}

// Restore implements [sandbox.SnapshotKeeper]. A closed sandbox is replaced on its actor
// (restoreRequest), so an engine killed part way leaves the key's previous instance or the new
// one, never neither; an allowlisted one is disposed, then acquired from the snapshot.
func (b *Backend) Restore(ctx context.Context, key sandbox.Key, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	began := time.Now()
	img, rec, err := b.snapshotImage(ctx, id)
	if err != nil {
		return nil, err
	}
	old := b.instanceOf(ctx, key, spec)
	from := spec.Clone()
	from.ImageID = img
	sb, err := b.renew(ctx, key, from, "")
	if err != nil {
		return nil, err
	}
	took := time.Since(began)
	b.log.Info("sandbox restored", zap.String("key", key.String()), zap.String("snapshot", rec.ID), zap.Duration("elapsed", took))
	if obs := b.reporter(ctx); obs != nil {
		obs.SandboxRestored(ctx, sandbox.SandboxRestored{Act: sandbox.Act{Key: key, Kind: spec.Kind, Backend: BackendName,
			InstanceID: sb.InstanceID(), Took: took}, Snapshot: rec.ID, Replaced: old, Reason: sandbox.ActReason(ctx)})
	}
	return sb, nil
}

// renew puts a new instance of spec (a restore's names its snapshot's image) under key's
// name. A closed sandbox is replaced on its actor (restoreRequest); an allowlisted one is
// disposed, then acquired, its proxy and network made again with it. instance, for a reset,
// is the instance it replaces: a name that holds another, or none, is gone, and nothing is
// made.
func (b *Backend) renew(ctx context.Context, key sandbox.Key, spec sandbox.Spec, instance string) (*Sandbox, error) {
	if spec.Egress == sandbox.EgressAllowlist {
		if instance != "" && b.instanceOf(ctx, key, spec) != instance {
			return nil, &sandbox.GoneError{InstanceID: instance, Reason: goneBeforeReset}
		}
		if f := b.Dispose(ctx, key, sandbox.DisposeOptions{Kind: &spec.Kind}); f != nil {
			return nil, fmt.Errorf("renew %s: remove its sandbox: %w", key, f)
		}
		sb, err := b.acquire(ctx, key, spec, true)
		if err != nil {
			return nil, err
		}
		return sb.(*Sandbox), nil
	}
	return b.replace(ctx, key, spec, instance)
}

// replace has the key's actor replace its instance with a new one of from.
func (b *Backend) replace(ctx context.Context, key sandbox.Key, from sandbox.Spec, instance string) (*Sandbox, error) {
	name := docker.ContainerName(key, from.Kind, "")
	pid, err := b.container(ctx, name)
	if err != nil {
		return nil, unavailable(err)
	}
	env := &request{msg: &restoreRequest{acquireRequest: acquireRequest{Key: key, Spec: from, Fresh: true}, Instance: instance}}
	res, err := ask[*acquireResponse](ctx, b, name, pid, env, 0)
	if err != nil {
		return nil, unavailable(err)
	}
	if res.Err != nil {
		return nil, busy(res.Err)
	}
	return b.newHandle(pid, name, key, from, res, env.bound), nil
}

// restoreRequest replaces the actor's instance with a new one from a snapshot's image, in
// steps an engine killed between any two leaves recoverable: the previous instance is renamed
// aside (docker.AsideName), the new one acquired under the name, then the previous removed. A
// failure puts the previous instance back. The next acquire of the name after a crash
// finishes or undoes it (recoverAside).
type restoreRequest struct {
	acquireRequest
	Instance string // a reset's: the instance it replaces (renew)
}

func (*restoreRequest) needsFreeze() bool  { return false }
func (*restoreRequest) fail(err error) any { return &acquireResponse{Err: err} }

func (m *restoreRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	res := a.restore(ctx, m)
	if res.Err == nil {
		a.slept(&m.acquireRequest, res.InstanceID)
		env.bound = a.binding()
	}
	reply(res)
}

func (a *containerActor) restore(ctx context.Context, m *restoreRequest) *acquireResponse {
	aside := docker.AsideName(a.name)
	if _, err := a.b.engine.Remove(ctx, aside); err != nil { // a stale one: the name's instance is what counts
		return &acquireResponse{Err: fmt.Errorf("remove %s: %w", aside, err)}
	}
	info, err := a.refresh(ctx)
	if err != nil {
		return &acquireResponse{Err: fmt.Errorf("inspect %s: %w", a.name, err)}
	}
	if m.Instance != "" && (info == nil || info.ID != m.Instance) {
		return &acquireResponse{Err: &sandbox.GoneError{InstanceID: m.Instance, Reason: goneBeforeReset}}
	}
	old := ""
	if info != nil {
		if err := a.b.engine.Rename(ctx, info.ID, aside); err != nil {
			return &acquireResponse{Err: fmt.Errorf("set %s aside: %w", a.name, err)}
		}
		old = info.ID
		a.b.sleeps.drop(a.name)
		a.forget()
	}
	a.restoring = true // recoverAside must not put back what this restore set aside
	res := a.acquire(ctx, &m.acquireRequest)
	a.restoring = false
	switch {
	case res.Err != nil && old != "":
		a.removeContainer(a.name) // what the failed acquire may have left
		if err := a.b.engine.Rename(ctx, old, a.name); err != nil {
			a.log.Warn("the previous instance could not be put back after a failed restore; the next acquire does", zap.Error(err))
		}
		a.forget()
	case old != "":
		if _, err := a.b.engine.Remove(context.WithoutCancel(ctx), old); err != nil {
			a.log.Warn("remove the instance a restore replaced", zap.String("container_id", old), zap.Error(err))
		}
	}
	return res
}

// recoverAside finishes or undoes a restore or reset an engine did not finish, at an acquire
// that found info under the name (nil when none). With nothing under the name, the previous
// instance set aside is put back (undone). With a new instance under it that never started,
// the one set aside is removed (finished: the acquire goes on to start the new one). It costs
// one inspect of the aside name, and only where the name is free or holds a container that
// never ran (a cold create): a reused or restarted instance has run.
func (a *containerActor) recoverAside(ctx context.Context, info *docker.ContainerInfo) (*docker.ContainerInfo, error) {
	if a.restoring {
		return info, nil
	}
	if info != nil && (info.Running || info.StartedAt.Year() > 1) {
		return info, nil
	}
	aside := docker.AsideName(a.name)
	prev, err := a.b.engine.Inspect(ctx, aside)
	if errors.Is(err, docker.ErrNotFound) {
		return info, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", aside, err)
	}
	if info != nil {
		if _, err := a.b.engine.Remove(ctx, prev.ID); err != nil {
			return nil, fmt.Errorf("remove %s: %w", aside, err)
		}
		a.log.Info("finished a restore its engine did not: removed the instance it replaced", zap.String("container_id", prev.ID))
		return info, nil
	}
	if err := a.b.engine.Rename(ctx, prev.ID, a.name); err != nil {
		return nil, fmt.Errorf("put %s back: %w", aside, err)
	}
	a.log.Info("undid a restore its engine did not finish: the previous instance is back", zap.String("container_id", prev.ID))
	return a.refresh(ctx)
}

// instanceOf is the instance the key's sandbox of spec's kind runs now, "" when none.
func (b *Backend) instanceOf(ctx context.Context, key sandbox.Key, spec sandbox.Spec) string {
	info, err := b.engine.Inspect(ctx, docker.ContainerName(key, spec.Kind, b.egressID(spec)))
	if err != nil {
		return ""
	}
	return info.ID
}

// Fork implements [sandbox.SnapshotKeeper].
func (b *Backend) Fork(ctx context.Context, id string, keys []sandbox.Key, spec sandbox.Spec) ([]sandbox.Sandbox, error) {
	began := time.Now()
	img, rec, err := b.snapshotImage(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if old := b.instanceOf(ctx, k, spec); old != "" {
			return nil, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("%s already has a sandbox of kind %q; a fork makes new ones (restore replaces one)", k, spec.Kind)}
		}
	}
	sbs := make([]sandbox.Sandbox, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = b.acquireFrom(ctx, k, spec, img)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, k := range keys {
			if sbs[i] != nil {
				b.Dispose(context.WithoutCancel(ctx), k, sandbox.DisposeOptions{Kind: &spec.Kind, InstanceID: sbs[i].InstanceID()})
			}
		}
		return nil, fmt.Errorf("fork %s: %w", id, err)
	}
	took := time.Since(began)
	ev := sandbox.SandboxForked{Act: sandbox.Act{Key: sandbox.Key{Scope: keys[0].Scope, ThreadID: keys[0].ThreadID}, Kind: spec.Kind,
		Backend: BackendName, Took: took}, Snapshot: rec.ID, Keys: slices.Clone(keys), Reason: sandbox.ActReason(ctx)}
	for _, sb := range sbs {
		ev.Instances = append(ev.Instances, sb.InstanceID())
	}
	b.log.Info("snapshot forked", zap.String("snapshot", rec.ID), zap.Int("sandboxes", len(keys)), zap.Duration("elapsed", took))
	if obs := b.reporter(ctx); obs != nil {
		obs.SandboxForked(ctx, ev)
	}
	return sbs, nil
}

// acquireFrom acquires a new sandbox of (key, spec) created from the snapshot image img: an
// instance that already exists under the key's name is refused, and no warm pool's member
// is taken.
func (b *Backend) acquireFrom(ctx context.Context, key sandbox.Key, spec sandbox.Spec, img string) (sandbox.Sandbox, error) {
	from := spec.Clone()
	from.ImageID = img
	return b.acquire(ctx, key, from, true)
}

// snapshotImage returns the ID of the image of snapshot id on this daemon, made when missing,
// and the snapshot's record.
func (b *Backend) snapshotImage(ctx context.Context, id string) (string, sandbox.SnapshotInfo, error) {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return "", sandbox.SnapshotInfo{}, err
	}
	seam, store, err := b.snapshots()
	if err != nil {
		return "", sandbox.SnapshotInfo{}, err
	}
	rec, err := store.Record(ctx, id)
	if err != nil {
		return "", rec, err
	}
	began := time.Now()
	base, cfg, img, err := b.snapshotConfig(ctx, seam, rec)
	if err != nil {
		return "", rec, err
	}
	if _, err := seam.ImageConfig(ctx, img); err == nil {
		return img, rec, nil
	} else if !errors.Is(err, docker.ErrNotFound) {
		return "", rec, unavailable(fmt.Errorf("inspect the image of snapshot %s: %w", id, err))
	}
	_, err = b.loadFlight.do(ctx, img, began, func(ctx context.Context) (bool, error) {
		return true, b.loadSnapshotImage(ctx, seam, store, rec, base, cfg, img)
	})
	if err != nil {
		return "", rec, err
	}
	return img, rec, nil
}

// snapshotImageID is the ID the snapshot's image has on this daemon (made or not).
func (b *Backend) snapshotImageID(ctx context.Context, seam snapshotSeam, rec sandbox.SnapshotInfo) (string, error) {
	_, _, img, err := b.snapshotConfig(ctx, seam, rec)
	return img, err
}

// snapshotConfig builds the configuration of rec's image from the local image it is relative
// to, and returns that image, the configuration and its ID.
func (b *Backend) snapshotConfig(ctx context.Context, seam snapshotSeam, rec sandbox.SnapshotInfo) (docker.ImageConfig, []byte, string, error) {
	base, err := seam.ImageConfig(ctx, rec.Image)
	if errors.Is(err, docker.ErrNotFound) || (err == nil && base.ID != rec.Image) {
		return base, nil, "", &sandbox.ImageMissingError{Backend: BackendName, Image: rec.Image,
			Hint: fmt.Sprintf("snapshot %s holds only what its sandbox changed against this image; build or load the image on this engine's daemon", rec.ID)}
	}
	if err != nil {
		return base, nil, "", unavailable(fmt.Errorf("inspect image %s: %w", rec.Image, err))
	}
	cfg, err := snapshotImageConfig(base, rec, b.cfg.Labels)
	if err != nil {
		return base, nil, "", err
	}
	sum := sha256.Sum256(cfg)
	return base, cfg, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// snapshotImageConfig is the image configuration of a snapshot: the image's own, with the
// engine's configured labels (docker.Config.Labels, as on every resource it makes) and
// label.Snapshot naming the snapshot, and its layers followed by the snapshot's.
func snapshotImageConfig(base docker.ImageConfig, rec sandbox.SnapshotInfo, extra map[string]string) ([]byte, error) {
	var config map[string]any
	if len(base.Config) > 0 && string(base.Config) != "null" {
		dec := json.NewDecoder(bytes.NewReader(base.Config))
		dec.UseNumber()
		if err := dec.Decode(&config); err != nil {
			return nil, fmt.Errorf("read the configuration of image %s: %w", base.ID, err)
		}
	}
	if config == nil {
		config = map[string]any{}
	}
	labels, _ := config["Labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	for k, v := range extra {
		labels[k] = v
	}
	labels[label.Snapshot] = rec.ID
	config["Labels"] = labels
	doc := map[string]any{
		"architecture": base.Architecture,
		"os":           base.OS,
		"config":       config,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": append(slices.Clone(base.DiffIDs), rec.Layer)},
	}
	if base.Variant != "" {
		doc["variant"] = base.Variant
	}
	return json.Marshal(doc)
}

// loadSnapshotImage loads img: an image archive of its configuration and the snapshot's
// layer, streamed from the store and checked on the way. A layer that fails checkLayer, or
// whose digest or size is not its record's, ends the archive with an error, so the daemon
// loads nothing.
func (b *Backend) loadSnapshotImage(ctx context.Context, seam snapshotSeam, store SnapshotStore, rec sandbox.SnapshotInfo,
	base docker.ImageConfig, cfg []byte, img string) error {
	layer, err := store.Layer(ctx, rec.ID)
	if err != nil {
		return err
	}
	defer layer.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeImageArchive(pw, layer, rec, base, cfg, img)) }()
	ids, err := seam.LoadImage(ctx, pr)
	pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
	var refused *sandbox.SnapshotRefusedError
	if errors.As(err, &refused) {
		refused.ID = rec.ID
		return refused
	}
	if err != nil {
		return unavailable(fmt.Errorf("load the image of snapshot %s: %w", rec.ID, err))
	}
	if !slices.Contains(ids, img) {
		return fmt.Errorf("load the image of snapshot %s: the daemon loaded %v, not %s", rec.ID, ids, img)
	}
	b.log.Info("snapshot image loaded", zap.String("snapshot", rec.ID), zap.String("image", img))
	return nil
}

// writeImageArchive writes the `docker load` archive of img to w: the manifest, the
// configuration, and the snapshot's layer (the image's own layers are named but not sent:
// the daemon has them). The layer is checked as it streams; a refusal is returned before the
// archive's end is written.
func writeImageArchive(w io.Writer, layer io.Reader, rec sandbox.SnapshotInfo, base docker.ImageConfig, cfg []byte, img string) error {
	hexID := img[len("sha256:"):]
	layers := make([]string, 0, len(base.DiffIDs)+1)
	for i := range base.DiffIDs {
		layers = append(layers, fmt.Sprintf("base-%d/layer.tar", i))
	}
	layers = append(layers, "snapshot/layer.tar")
	manifest, err := json.Marshal([]map[string]any{{"Config": hexID + ".json", "RepoTags": nil, "Layers": layers}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	put := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := put(hexID+".json", cfg); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "snapshot/layer.tar", Typeflag: tar.TypeReg, Mode: 0o644, Size: rec.Bytes}); err != nil {
		return err
	}
	if err := copyChecked(tw, layer, rec); err != nil {
		return err
	}
	if err := put("manifest.json", manifest); err != nil {
		return err
	}
	return tw.Close()
}

// copyChecked copies the layer to w while checkLayer reads the same bytes, and fails unless
// both end well and the bytes are the record's (digest and size).
func copyChecked(w io.Writer, layer io.Reader, rec sandbox.SnapshotInfo) error {
	cr, cw := io.Pipe()
	verdict := make(chan error, 1)
	go func() {
		_, err := checkLayer(cr)
		if err == nil {
			_, err = io.Copy(io.Discard, cr) // the archive's padding
		}
		cr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		verdict <- err
	}()
	digest := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, cw, digest), io.LimitReader(layer, rec.Bytes+1))
	cw.Close()
	if cerr := <-verdict; cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("stream the layer: %w", err)
	}
	return layerMatches(digest, n, rec)
}

func layerMatches(digest hash.Hash, n int64, rec sandbox.SnapshotInfo) error {
	if got := "sha256:" + hex.EncodeToString(digest.Sum(nil)); n != rec.Bytes || got != rec.Layer {
		return &sandbox.SnapshotRefusedError{ID: rec.ID, Reason: fmt.Sprintf("the stored layer (%d bytes, %s) is not the one its record names (%d bytes, %s)", n, got, rec.Bytes, rec.Layer)}
	}
	return nil
}
