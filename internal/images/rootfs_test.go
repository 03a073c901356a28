package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// readRootfs writes the root filesystem for a fake busybox that has every applet but nohup
// and returns its entries by name, with their bodies, in order.
func readRootfs(t *testing.T) (map[string]*tar.Header, map[string]string, []string) {
	t.Helper()
	fake := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(fake, []byte("fake busybox"), 0o755); err != nil {
		t.Fatal(err)
	}
	have := make(map[string]bool)
	for _, a := range applets() {
		have[a] = a != "nohup"
	}
	var buf bytes.Buffer
	if err := writeRootfs(&buf, rootfs(fake, have)); err != nil {
		t.Fatalf("writeRootfs: %v", err)
	}
	hdrs, bodies := map[string]*tar.Header{}, map[string]string{}
	var order []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		if _, dup := hdrs[h.Name]; dup {
			t.Fatalf("%s appears twice", h.Name)
		}
		hdrs[h.Name], bodies[h.Name] = h, string(b)
		order = append(order, h.Name)
	}
	return hdrs, bodies, order
}

func TestRootfs(t *testing.T) {
	hdrs, bodies, _ := readRootfs(t)
	cases := []struct {
		name    string
		typ     byte
		mode    int64
		owner   int
		link    string
		bodyHas string
	}{
		{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/busybox", typ: tar.TypeReg, mode: 0o755, bodyHas: "fake busybox"},
		{name: "bin/sh", typ: tar.TypeSymlink, mode: 0o777, link: "busybox"},
		{name: "bin/[", typ: tar.TypeSymlink, mode: 0o777, link: "busybox"},
		{name: "bin/setsid", typ: tar.TypeSymlink, mode: 0o777, link: "busybox"},
		{name: "bin/nohup", typ: tar.TypeReg, mode: 0o755, bodyHas: "trap '' HUP"},
		{name: "etc/passwd", typ: tar.TypeReg, mode: 0o644, bodyHas: "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"},
		{name: "etc/group", typ: tar.TypeReg, mode: 0o644, bodyHas: "sandbox:x:1000:\n"},
		{name: "home/sandbox/", typ: tar.TypeDir, mode: 0o755, owner: 1000},
		{name: "root/", typ: tar.TypeDir, mode: 0o700},
		{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: "usr/bin/env", typ: tar.TypeSymlink, mode: 0o777, link: "/bin/busybox"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := hdrs[tc.name]
			if !ok {
				t.Fatalf("%s missing", tc.name)
			}
			if h.Typeflag != tc.typ || h.Mode != tc.mode || h.Uid != tc.owner || h.Gid != tc.owner || h.Linkname != tc.link {
				t.Fatalf("%s: type %c mode %o owner %d:%d link %q, want type %c mode %o owner %d:%d link %q",
					tc.name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, tc.typ, tc.mode, tc.owner, tc.owner, tc.link)
			}
			if !strings.Contains(bodies[tc.name], tc.bodyHas) {
				t.Fatalf("%s body %q lacks %q", tc.name, bodies[tc.name], tc.bodyHas)
			}
		})
	}
}

func TestRootfsComplete(t *testing.T) {
	hdrs, _, order := readRootfs(t)
	for _, a := range applets() {
		if _, ok := hdrs["bin/"+a]; !ok {
			t.Errorf("applet %s missing", a)
		}
	}
	// Parents come before their children, and everything but home/sandbox belongs to root.
	seen := map[string]bool{}
	for _, name := range order {
		if parent := path.Dir(strings.TrimSuffix(name, "/")); parent != "." && !seen[parent+"/"] {
			t.Errorf("%s comes before its directory %s", name, parent)
		}
		seen[name] = true
		if h := hdrs[name]; name != "home/sandbox/" && (h.Uid != 0 || h.Gid != 0) {
			t.Errorf("%s owned by %d:%d, want root", name, h.Uid, h.Gid)
		}
	}
}

func TestBusyboxApplets(t *testing.T) {
	cases := []struct {
		name    string
		path    string
		wantErr string // in the message; "" for none
	}{
		{name: "missing", path: filepath.Join(t.TempDir(), "busybox"), wantErr: "apt-get install busybox-static"},
		{name: "dynamically linked", path: "/bin/ls", wantErr: "apt-get install busybox-static"},
		{name: "not a program", path: "/etc/passwd", wantErr: "read /etc/passwd"},
	}
	if _, err := os.Stat(busyboxPath); err == nil {
		cases = append(cases, struct{ name, path, wantErr string }{name: "debian busybox-static", path: busyboxPath})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			have, err := busyboxApplets(context.Background(), tc.path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("busyboxApplets() error = %v", err)
				}
				if !have["sh"] || !have["sleep"] {
					t.Fatalf("busyboxApplets() = %v, lacks sh or sleep", have)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("busyboxApplets() error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
