package snapshot

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// plant writes a snapshot straight into a directory store, as a store an attacker could write
// to would hold it: the layer's bytes and a record naming them, relative to the busybox image.
func plant(t *testing.T, dir string, layer []byte, tamper func(*sandbox.SnapshotInfo)) string {
	t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	sum := sha256.Sum256(layer)
	key := itest.NewKey(t)
	rec := sandbox.SnapshotInfo{ID: id, Key: key, Kind: "shell", Backend: actors.BackendName,
		Image: dockertest.Docker(t, "image", "inspect", "-f", "{{.Id}}", dockertest.Busybox(t)),
		Layer: "sha256:" + hex.EncodeToString(sum[:]), Bytes: int64(len(layer)), Created: time.Now().UTC()}
	if tamper != nil {
		tamper(&rec)
	}
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".layer"), layer, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".json"), js, 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

func layerOf(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A layer in the store is data: one that would not restore as the same things inside the new
// sandbox alone is refused before the daemon loads any of it, and nothing of it lands on the
// host or in a sandbox. Each case plants one hostile layout; with the layer check switched
// off (checkLayer in actors/snapshot_layer.go answering nil) the load goes through and the
// case fails.
func TestRestoreRefusesHostileLayers(t *testing.T) {
	dir := t.TempDir()
	store, err := actors.NewSnapshotDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := itest.NewBackend(t, actors.WithSnapshotStore(store))
	canary := filepath.Join(t.TempDir(), "canary")
	climb := strings.Repeat("../", 30) + strings.TrimPrefix(canary, "/")
	reg := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
	}
	cases := []struct {
		name   string
		layer  []byte
		inside string // a path the hostile layer would make inside the sandbox
	}{
		{"a name that climbs out", layerOf(t, reg(climb, 5)), ""},
		{"an absolute name", layerOf(t, reg(canary, 5)), ""},
		{"a file through its own link out", layerOf(t, &tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"},
			reg("a/etc/owned", 5)), "/etc/owned"},
		{"a hard link to a file it does not hold", layerOf(t, &tar.Header{Name: "stolen", Typeflag: tar.TypeLink, Linkname: "etc/passwd"}), "/stolen"},
		{"a whiteout of the parent", layerOf(t, reg("etc/.wh..", 0)), ""},
		{"an opaque whiteout", layerOf(t, reg("etc/.wh..wh..opq", 0), reg("etc/owned", 5)), "/etc/owned"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := plant(t, dir, tc.layer, nil)
			key := itest.NewKey(t)
			t.Cleanup(func() { b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}) })
			sb, err := b.Restore(itest.Context(t), key, spec(t), id)
			var refused *sandbox.SnapshotRefusedError
			if !errors.As(err, &refused) || refused.ID != id {
				if err == nil && tc.inside != "" {
					t.Logf("inside the sandbox: %q", itest.Sh(t, sb, "ls -la "+tc.inside+" 2>&1 || true"))
				}
				t.Fatalf("restore of a hostile layer = %v, want refused before the load", err)
			}
			if _, err := os.Lstat(canary); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the host's canary %s exists", canary)
			}
			if out, _, _ := dockertest.DockerErr(itest.Context(t), "image", "ls", "-q", "--filter", "label="+label.Snapshot+"="+id); len(bytes.TrimSpace(out)) != 0 {
				t.Fatalf("the refused layer's image was loaded: %s", out)
			}
		})
	}
}

// A layer the store altered after its record was written (its digest or size no longer the
// record's) is refused; so is a snapshot ID that is not one, before any store is asked.
func TestRestoreRefusesAlteredLayersAndIDs(t *testing.T) {
	dir := t.TempDir()
	store, err := actors.NewSnapshotDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := itest.NewBackend(t, actors.WithSnapshotStore(store))
	good := layerOf(t, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3})
	id := plant(t, dir, good, nil)
	altered := bytes.Clone(good)
	altered[bytes.Index(altered, []byte("xxx"))] = 'y'
	if err := os.WriteFile(filepath.Join(dir, id+".layer"), altered, 0o600); err != nil {
		t.Fatal(err)
	}
	key := itest.NewKey(t)
	t.Cleanup(func() { b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}) })
	var refused *sandbox.SnapshotRefusedError
	if _, err := b.Restore(itest.Context(t), key, spec(t), id); !errors.As(err, &refused) {
		t.Fatalf("restore of an altered layer = %v, want refused", err)
	}
	outside := filepath.Join(t.TempDir(), "0123456789abcdef0123456789abcdef.json")
	if err := os.WriteFile(outside, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, strings.TrimSuffix(outside, ".json"))
	for _, bad := range []string{rel, "../" + id, id + "/..", strings.ToUpper(id), ""} {
		if _, err := b.DescribeSnapshot(itest.Context(t), bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("describe %q = %v, want invalid", bad, err)
		}
		if _, err := store.Record(itest.Context(t), bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("the store's record %q = %v, want invalid", bad, err)
		}
	}
}

// A snapshot relative to an image this daemon does not hold is refused with the image's
// digest named, and nothing is made.
func TestRestoreNamesTheMissingImage(t *testing.T) {
	dir := t.TempDir()
	store, err := actors.NewSnapshotDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := itest.NewBackend(t, actors.WithSnapshotStore(store))
	missing := "sha256:" + strings.Repeat("ab", 32)
	id := plant(t, dir, layerOf(t), func(r *sandbox.SnapshotInfo) { r.Image = missing })
	key := itest.NewKey(t)
	t.Cleanup(func() { b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}) })
	_, err = b.Restore(itest.Context(t), key, spec(t), id)
	var im *sandbox.ImageMissingError
	if !errors.As(err, &im) || im.Image != missing {
		t.Fatalf("restore without its image = %v, want the digest %s named", err, missing)
	}
	if out := dockertest.Docker(t, "ps", "-aq", "--filter", "label="+label.Scope+"="+label.Value(key.Scope)); out != "" {
		t.Fatalf("a container was made: %s", out)
	}
}
