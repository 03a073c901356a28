package docker_test

// The tar plane: copy in, the no-follow stat, reads and their cap.

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

func TestEngineCopyInStatRead(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	c := testCtx(t)
	content := []byte("\x00\xff\xfe not UTF-8 \r\n")
	long := "/maf-sandbox/work/" + strings.Repeat("d", 120) + "/" + strings.Repeat("f", 120)
	entries := append(docker.DirChain([]string{"/maf-sandbox", "/maf-sandbox/work"}, 10001, 20001),
		docker.FileEntry("/maf-sandbox/work/f.bin", content, 0o640, 10001, 20001),
		docker.DirEntry(long[:strings.LastIndexByte(long, '/')], 0o755, 10001, 20001),
		docker.FileEntry(long, []byte("long"), 0o644, 10001, 20001))
	tarball, err := docker.BuildTar(entries...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CopyIn(c, name, tarball); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		want docker.Entry
	}{
		{"ancestor root-owned", "/maf-sandbox", docker.Entry{Type: docker.EntryDir, Mode: 0o755, UID: 0, GID: 0}},
		{"base guest-owned", "/maf-sandbox/work", docker.Entry{Type: docker.EntryDir, Mode: 0o755, UID: 10001, GID: 20001}},
		{"file", "/maf-sandbox/work/f.bin", docker.Entry{Type: docker.EntryFile, Size: int64(len(content)), Mode: 0o640, UID: 10001, GID: 20001}},
		{"long name (extended header)", long, docker.Entry{Type: docker.EntryFile, Size: 4, Mode: 0o644, UID: 10001, GID: 20001}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Stat(testCtx(t), name, tc.path)
			if err != nil || got == nil {
				t.Fatalf("Stat = %v, %v", got, err)
			}
			if got.Type != tc.want.Type || got.Size != tc.want.Size || got.Mode&0o7777 != tc.want.Mode || got.UID != tc.want.UID || got.GID != tc.want.GID {
				t.Fatalf("Stat = %+v, want %+v", *got, tc.want)
			}
		})
	}
	ent, body, err := e.Read(c, name, "/maf-sandbox/work/f.bin", int64(len(content)))
	if err != nil || ent.Type != docker.EntryFile || !bytes.Equal(body, content) {
		t.Fatalf("Read = %+v, %q, %v", ent, body, err)
	}
	// The guest sees the same bytes: as the file's owner, since a root without capabilities
	// (every workload's) may not read another user's mode 0640 file.
	out, err := e.Exec(c, docker.ExecRequest{Target: name, User: "10001:20001", Argv: []string{"cat", "/maf-sandbox/work/f.bin"}})
	if err != nil || !bytes.Equal(out.Stdout, content) {
		t.Fatalf("guest read %q, %v", out.Stdout, err)
	}
}

// TestEngineStatKinds holds the no-follow stat to each kind of entry and to absence, and the read
// of what has no body to its header alone.
func TestEngineStatKinds(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	c := testCtx(t)
	out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c",
		"mkdir -p /t/d && echo x > /t/d/f && ln -s /etc/passwd /t/lnk && mkfifo /t/fifo && ln /t/d/f /t/hard"}})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", out, err)
	}
	for _, tc := range []statKind{
		{"directory", "/t/d", false, docker.EntryDir, ""},
		{"symlink is described, not followed", "/t/lnk", false, docker.EntrySymlink, "/etc/passwd"},
		{"fifo is other", "/t/fifo", false, docker.EntryOther, ""},
		{"absent", "/t/none", true, 0, ""},
		{"absent parent", "/t/none/deeper", true, 0, ""},
		{"path with a space, absent", "/t/a b", true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Stat(testCtx(t), name, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, got)
		})
	}
	t.Run("path under a file is a failure, not absence", func(t *testing.T) {
		got, err := e.Stat(testCtx(t), name, "/t/d/f/x")
		if err == nil || errors.Is(err, docker.ErrPathAbsent) {
			t.Fatalf("Stat = %+v, %v", got, err)
		}
	})
	readsWithoutBody(t, e, name)
}

// statKind is one path of testStatKinds and what its stat must say.
type statKind struct {
	name     string
	path     string
	wantNil  bool
	wantType docker.EntryType
	wantLink string
}

// check fails t unless got is what k wants: absence, or the kind and link target with no
// size but a regular file's.
func (k statKind) check(t *testing.T, got *docker.Entry) {
	t.Helper()
	if k.wantNil {
		if got != nil {
			t.Fatalf("Stat = %+v, want absence", *got)
		}
		return
	}
	if got == nil || got.Type != k.wantType || got.LinkTarget != k.wantLink {
		t.Fatalf("Stat = %+v, want %v -> %q", got, k.wantType, k.wantLink)
	}
	if got.Type != docker.EntryFile && got.Size != 0 {
		t.Fatalf("size %d reported for a %v", got.Size, got.Type)
	}
}

// readsWithoutBody holds Read to the header alone for a directory and a symlink (never
// followed) in testStatKinds' tree, and to ErrPathAbsent for an absent path.
func readsWithoutBody(t *testing.T, e docker.Containers, name string) {
	t.Run("read of a directory has no body", func(t *testing.T) {
		ent, body, err := e.Read(testCtx(t), name, "/t/d", 1<<20)
		if err != nil || ent.Type != docker.EntryDir || body != nil {
			t.Fatalf("Read = %+v, %d bytes, %v", ent, len(body), err)
		}
	})
	t.Run("read of a symlink does not follow it", func(t *testing.T) {
		ent, body, err := e.Read(testCtx(t), name, "/t/lnk", 1<<20)
		if err != nil || ent.Type != docker.EntrySymlink || body != nil {
			t.Fatalf("Read = %+v, %q, %v", ent, body, err)
		}
	})
	t.Run("read of an absent path", func(t *testing.T) {
		_, _, err := e.Read(testCtx(t), name, "/t/none", 10)
		if !errors.Is(err, docker.ErrPathAbsent) {
			t.Fatalf("Read = %v, want ErrPathAbsent", err)
		}
	})
}

func TestEngineReadCap(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	c := testCtx(t)
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"dd", "if=/dev/zero", "of=/big", "bs=1024", "count=1024"}}); err != nil || out.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", out, err)
	}
	start := time.Now()
	ent, body, err := e.Read(c, name, "/big", 1024)
	var ce *docker.CapExceededError
	if !errors.As(err, &ce) || ce.Size != 1<<20 || ce.Cap != 1024 || ce.Path != "/big" || body != nil {
		t.Fatalf("Read = %+v, %d bytes, %v; want the cap refused on the header", ent, len(body), err)
	}
	if ent == nil || ent.Size != 1<<20 {
		t.Fatalf("entry %+v", ent)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("refusal took %s", el)
	}
	ent, body, err = e.Read(c, name, "/big", 1<<20)
	if err != nil || len(body) != 1<<20 || ent.Size != 1<<20 {
		t.Fatalf("Read at the cap = %d bytes, %v", len(body), err)
	}
}

// TestEngineBoundedReadsUnderLoad runs 200 bounded reads and stats next to a 1 MiB file, eight
// at a time: none may hang, every one must answer as expected, and no goroutine of the engine
// may outlive its call.
func TestEngineBoundedReadsUnderLoad(t *testing.T) {
	image := dockertest.Busybox(t)
	c := newEngine(t)
	name, _ := workload(t, c, image, testKey(t))
	mustExec(t, c, name, "sh", "-c", "dd if=/dev/zero of=/big bs=1024 count=1024 2>/dev/null && printf small > /small")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	type op struct {
		what string
		do   func(ctx context.Context) error
	}
	ops := []op{
		{"stat big", func(ctx context.Context) error {
			e, err := c.Stat(ctx, name, "/big")
			if err == nil && (e == nil || e.Size != 1<<20) {
				err = errors.New("wrong entry")
			}
			return err
		}},
		{"read big over cap", func(ctx context.Context) error {
			_, _, err := c.Read(ctx, name, "/big", 1024)
			if errors.Is(err, docker.ErrCapExceeded) {
				return nil
			}
			return errors.Join(errors.New("cap not refused"), err)
		}},
		{"read small", func(ctx context.Context) error {
			_, b, err := c.Read(ctx, name, "/small", 1024)
			if err == nil && string(b) != "small" {
				err = errors.New("wrong bytes")
			}
			return err
		}},
		{"stat root", func(ctx context.Context) error {
			e, err := c.Stat(ctx, name, "/")
			if err == nil && (e == nil || e.Type != docker.EntryDir) {
				err = errors.New("wrong entry")
			}
			return err
		}},
		{"stat absent", func(ctx context.Context) error {
			e, err := c.Stat(ctx, name, "/absent")
			if err == nil && e != nil {
				err = errors.New("absent path described")
			}
			return err
		}},
	}
	const total, workers = 200, 8
	jobs := make(chan int)
	var (
		mu      sync.Mutex
		fails   []error
		slowest time.Duration
		wg      sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				o := ops[i%len(ops)]
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				err := o.do(ctx)
				el := time.Since(t0)
				cancel()
				mu.Lock()
				if el > slowest {
					slowest = el
				}
				if err != nil {
					fails = append(fails, errors.Join(errors.New(o.what), err))
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, err := range fails {
		t.Error(err)
	}
	t.Logf("%d operations, %d at a time: %s in all, %s each on average, slowest %s",
		total, workers, time.Since(start).Round(time.Millisecond), (time.Since(start) / total).Round(time.Millisecond), slowest.Round(time.Millisecond))
}

func mustExec(t *testing.T, c *docker.Engine, name string, argv ...string) {
	t.Helper()
	out, err := c.Exec(testCtx(t), docker.ExecRequest{Target: name, Argv: argv})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("exec %v: %+v, %v", argv, out, err)
	}
}
