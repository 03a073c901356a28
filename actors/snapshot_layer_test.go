package actors

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

func TestPlanLayer(t *testing.T) {
	dirs := map[string]bool{"/etc": true, "/usr": true, "/usr/lib": true}
	isDir := func(_ context.Context, p string) (bool, error) { return dirs[p], nil }
	changes := []docker.Change{
		{Kind: docker.ChangeModified, Path: "/etc"},
		{Kind: docker.ChangeModified, Path: "/etc/passwd"},
		{Kind: docker.ChangeAdded, Path: "/work"},
		{Kind: docker.ChangeAdded, Path: "/work/a"},
		{Kind: docker.ChangeAdded, Path: "/work/a/b"},
		{Kind: docker.ChangeDeleted, Path: "/bin/vi"},
		{Kind: docker.ChangeDeleted, Path: "/opt"},
		{Kind: docker.ChangeDeleted, Path: "/opt/x"}, // under a deleted directory: no whiteout of its own
		{Kind: docker.ChangeModified, Path: "/usr"},
		{Kind: docker.ChangeModified, Path: "/usr/lib"},
		{Kind: docker.ChangeAdded, Path: "/usr/lib/new.so"},
		{Kind: docker.ChangeAdded, Path: "/maf-sandbox-execd"},    // the engine's supervisor: not the guest's
		{Kind: docker.ChangeAdded, Path: "/.maf-sandbox-binding"}, // a pool member's binding: not the guest's
	}
	plan, err := planLayer(context.Background(), changes, isDir)
	if err != nil {
		t.Fatal(err)
	}
	want := layerPlan{
		headers:   []string{"/bin", "/etc", "/usr", "/usr/lib"},
		roots:     []string{"/etc/passwd", "/usr/lib/new.so", "/work"},
		whiteouts: []string{"/bin/vi", "/opt"},
	}
	if !slices.Equal(plan.headers, want.headers) || !slices.Equal(plan.roots, want.roots) || !slices.Equal(plan.whiteouts, want.whiteouts) {
		t.Fatalf("plan %+v\nwant %+v", plan, want)
	}
}

// tarOf builds an archive of headers (a regular file's body is its Linkname's bytes when
// Size is set, else empty).
func tarOf(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		body := []byte(strings.Repeat("x", int(h.Size)))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func reg(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
func dir(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755} }

// The layer check passes what a guest may legitimately leave (links pointing anywhere, device
// nodes, setuid bits, odd bytes in names, whiteouts) and refuses each hostile layout.
func TestCheckLayer(t *testing.T) {
	cases := []struct {
		name    string
		entries []*tar.Header
		refused bool
	}{
		{"a guest's layout", []*tar.Header{
			dir("work/"), reg("work/f"),
			{Name: "work/out", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
			{Name: "work/up", Typeflag: tar.TypeSymlink, Linkname: "../../../../.."},
			{Name: "work/hard", Typeflag: tar.TypeLink, Linkname: "work/f"},
			{Name: "work/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
			{Name: "work/disk", Typeflag: tar.TypeBlock, Devmajor: 8, Devminor: 0},
			{Name: "work/suid", Typeflag: tar.TypeReg, Mode: 0o4755},
			{Name: "work/fifo", Typeflag: tar.TypeFifo},
			reg("work/new\nline"), reg("work/\xff\xfe"), reg("work/-dash"), reg(`work/back\slash`),
			reg("bin/.wh.vi"),
		}, false},
		{"climbs out", []*tar.Header{reg("../../escape")}, true},
		{"climbs out from within", []*tar.Header{dir("work/"), reg("work/../../escape")}, true},
		{"absolute", []*tar.Header{reg("/tmp/escape")}, true},
		{"through its own link", []*tar.Header{{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"}, reg("a/etc/owned")}, true},
		{"through its own file", []*tar.Header{reg("a"), reg("a/b")}, true},
		{"hard link to what it does not hold", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "etc/shadow"}}, true},
		{"hard link out", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/shadow"}}, true},
		{"hard link to a link", []*tar.Header{{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}, {Name: "h", Typeflag: tar.TypeLink, Linkname: "s"}}, true},
		{"whiteout of the parent", []*tar.Header{reg("etc/.wh..")}, true},
		{"whiteout of nothing", []*tar.Header{reg(".wh.")}, true},
		{"opaque whiteout", []*tar.Header{reg("etc/" + opaqueWhiteout)}, true},
		{"whiteout with a body", []*tar.Header{{Name: "etc/.wh.passwd", Typeflag: tar.TypeReg, Size: 3}}, true},
		{"whiteout that is a link", []*tar.Header{{Name: "etc/.wh.passwd", Typeflag: tar.TypeSymlink, Linkname: "x"}}, true},
		{"twice", []*tar.Header{reg("a"), reg("a")}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkLayer(bytes.NewReader(tarOf(t, tc.entries...)))
			var refused *sandbox.SnapshotRefusedError
			if tc.refused != errors.As(err, &refused) || (!tc.refused && err != nil) {
				t.Fatalf("check = %v, refused want %v", err, tc.refused)
			}
			if tc.refused && !errors.Is(err, sandbox.ErrRefused) {
				t.Fatalf("%v is not in the refused family", err)
			}
		})
	}
}

// A guest file named like a deletion marker cannot be kept: the snapshot is refused, naming it.
func TestLayerRefusesWhiteoutNames(t *testing.T) {
	archive := func(_ context.Context, p string) (io.ReadCloser, error) {
		switch p {
		case "/etc":
			return io.NopCloser(bytes.NewReader(tarOf(t, dir("etc/")))), nil
		case "/etc/.wh.passwd":
			return io.NopCloser(bytes.NewReader(tarOf(t, reg(".wh.passwd")))), nil
		}
		return nil, docker.ErrNotFound
	}
	plan := layerPlan{headers: []string{"/etc"}, roots: []string{"/etc/.wh.passwd"}}
	_, err := writeLayer(context.Background(), io.Discard, plan, archive)
	var refused *sandbox.SnapshotRefusedError
	if !errors.As(err, &refused) || refused.Path != "/etc/.wh.passwd" {
		t.Fatalf("write = %v, want the name refused", err)
	}
}

// The layer names every entry from the root, keeps hard links within their archive, and what
// it writes passes its own check.
func TestWriteLayerRenames(t *testing.T) {
	archive := func(_ context.Context, p string) (io.ReadCloser, error) {
		var b []byte
		switch p {
		case "/srv":
			b = tarOf(t, dir("srv/"))
		case "/srv/app":
			b = tarOf(t, dir("app/"), reg("app/f"), &tar.Header{Name: "app/g", Typeflag: tar.TypeLink, Linkname: "app/f"})
		default:
			return nil, docker.ErrNotFound
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	var out bytes.Buffer
	plan := layerPlan{headers: []string{"/srv"}, roots: []string{"/srv/app"}, whiteouts: []string{"/srv/old"}}
	st, err := writeLayer(context.Background(), &out, plan, archive)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := checkLayer(bytes.NewReader(out.Bytes())); err != nil || n != st.entries || n != 5 {
		t.Fatalf("check of the written layer = %d, %v (wrote %d)", n, err, st.entries)
	}
	var got []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		got = append(got, h.Name+"|"+h.Linkname)
	}
	want := []string{"srv/|", "srv/app/|", "srv/app/f|", "srv/app/g|srv/app/f", path.Join("srv", ".wh.old") + "|"}
	if !slices.Equal(got, want) {
		t.Fatalf("layer %q\nwant %q", got, want)
	}
}
