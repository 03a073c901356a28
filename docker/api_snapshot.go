package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

var _ Snapshotting = (*Engine)(nil)

// Stop implements [Snapshotting] with the container stop endpoint. A paused container is
// stopped too: the engine thaws it to deliver the signals.
func (a *Engine) Stop(ctx context.Context, target string, grace time.Duration) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	secs := int(grace.Round(time.Second) / time.Second)
	args := []string{"stop", "--time", strconv.Itoa(secs), target}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		if _, err := b.client.ContainerStop(ctx, target, client.ContainerStopOptions{Timeout: &secs}); err != nil {
			return apiError(args, err, nil)
		}
		return nil
	})
}

// Archive implements [Snapshotting] with the archive GET, under the caller's context alone (a
// stream outlives a control call's budget).
func (a *Engine) Archive(ctx context.Context, target, guestPath string) (io.ReadCloser, error) {
	if err := checkTarget(target); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if !strings.HasPrefix(guestPath, "/") || strings.ContainsRune(guestPath, 0) {
		return nil, fmt.Errorf("archive: %w: guest path %q", ErrInvalid, guestPath)
	}
	args := []string{"cp", target + ":" + guestPath, "-"}
	b, err := a.ready(ctx)
	if err != nil {
		return nil, err
	}
	res, err := b.client.CopyFromContainer(ctx, target, client.CopyFromContainerOptions{SourcePath: guestPath})
	if err != nil {
		return nil, apiError(args, err, nil)
	}
	return res.Content, nil
}

// ImageConfig implements [Snapshotting] with one image inspect, whose raw answer gives the
// configuration as the daemon keeps it.
func (a *Engine) ImageConfig(ctx context.Context, ref string) (ImageConfig, error) {
	if err := checkImage("image inspect", ref); err != nil {
		return ImageConfig{}, err
	}
	args := []string{"image", "inspect", ref}
	var out ImageConfig
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		var raw bytes.Buffer
		if _, err := b.client.ImageInspect(ctx, ref, client.ImageInspectWithRawResponse(&raw)); err != nil {
			return apiError(args, err, nil)
		}
		var doc struct {
			ID           string          `json:"Id"`
			Os           string          `json:"Os"`
			Architecture string          `json:"Architecture"`
			Variant      string          `json:"Variant"`
			Config       json.RawMessage `json:"Config"`
			RootFS       struct {
				Type   string   `json:"Type"`
				Layers []string `json:"Layers"`
			} `json:"RootFS"`
		}
		if err := json.Unmarshal(raw.Bytes(), &doc); err != nil {
			return fmt.Errorf("%w: image inspect %s: %v", errMalformedAnswer, ref, err)
		}
		if !imageID.MatchString(doc.ID) || doc.RootFS.Type != "layers" {
			return fmt.Errorf("%w: image inspect %s: ID %q, root filesystem %q", errMalformedAnswer, ref, doc.ID, doc.RootFS.Type)
		}
		out = ImageConfig{ID: doc.ID, OS: doc.Os, Architecture: doc.Architecture, Variant: doc.Variant,
			DiffIDs: doc.RootFS.Layers, Config: doc.Config}
		return nil
	})
	return out, err
}

// LoadImage implements [Snapshotting] with the image load endpoint, reading its progress
// stream to the end: an error message in it fails the load.
func (a *Engine) LoadImage(ctx context.Context, r io.Reader) ([]string, error) {
	args := []string{"load"}
	ctx, end := a.inst.begin(ctx, "load")
	b, err := a.ready(ctx)
	if err != nil {
		end(err)
		return nil, err
	}
	res, err := b.client.ImageLoad(ctx, r, client.ImageLoadWithQuiet(true))
	if err != nil {
		err = apiError(args, err, nil)
		end(err)
		return nil, err
	}
	defer res.Close()
	ids, err := loadedImages(res)
	end(err)
	return ids, err
}

// loadedImages reads a load's progress messages: the IDs it loaded, or the error it reported.
func loadedImages(r io.Reader) ([]string, error) {
	dec := json.NewDecoder(r)
	var ids []string
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("docker load: read the answer: %w", err)
		}
		if m.Error != "" || m.ErrorDetail != nil {
			msg := m.Error
			if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
				msg = m.ErrorDetail.Message
			}
			return nil, &CommandError{Args: []string{"load"}, ExitCode: 500, Stderr: []byte(msg)}
		}
		if id, ok := strings.CutPrefix(strings.TrimSpace(m.Stream), "Loaded image ID: "); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, &CommandError{Args: []string{"load"}, Stderr: []byte("the daemon loaded no image")}
	}
	return ids, nil
}

// RemoveImage implements [Snapshotting]: never forced, never pruning parents.
func (a *Engine) RemoveImage(ctx context.Context, id string) (RemoveOutcome, error) {
	if !imageID.MatchString(id) {
		return 0, fmt.Errorf("image rm: %w: %q is not an image ID", ErrInvalid, id)
	}
	args := []string{"image", "rm", "--no-prune", id}
	outcome := Removed
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.ImageRemove(ctx, id, client.ImageRemoveOptions{})
		switch {
		case err == nil:
			return nil
		case isAnswer(err) && cerrdefs.IsNotFound(err):
			outcome = Absent
			return nil
		case isAnswer(err) && cerrdefs.IsConflict(err):
			return apiError(args, err, ErrConflict)
		}
		return apiError(args, err, nil)
	})
	return outcome, err
}
