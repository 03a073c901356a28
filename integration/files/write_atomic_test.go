package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// The crash test re-runs this test binary as the writer: these variables tell the child what
// to acquire and write. The child is killed before it can report anything else.
const (
	crashChildEnv  = "MAF_SANDBOX_WRITE_CRASH_CHILD" // the key, JSON
	crashLabelsEnv = "MAF_SANDBOX_WRITE_CRASH_LABELS"
	crashReady     = "write-crash-child: acquired"
	crashWrote     = "write-crash-child: wrote"
	crashFile      = "big.bin"
	crashSize      = 50 << 20
)

// stagingEntry matches a staging name in `ls -lA` output: its size and its name.
var stagingEntry = regexp.MustCompile(`\s(\d+)\s+\w+\s+\d+\s+[\d:]+\s+(\.maf-write-[0-9a-f]{32})$`)

func crashContent(fill string) []byte { return bytes.Repeat([]byte(fill), crashSize/len(fill)) }

// An engine killed (SIGKILL) while it writes a 50 MiB file leaves the file whole: the next
// acquire thaws the guest and finds the complete old content, never a mix. The writer is a
// real process (this test binary re-run) whose daemon connection runs through a proxy that
// holds the archive upload once cutAt bytes of it have passed; the writer is killed there,
// mid-transfer, and the daemon sees the archive end. A last round lets the write finish and
// finds the new content whole and no staging name left.
func TestWriteCrashLeavesOldOrNewContent(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild(t, crashChildEnv, archiveOnly())
		return
	}
	dockertest.Require(t)
	b := itest.NewBackend(t, archiveOnly()) // staging names and cut uploads are the archive plane's
	key := itest.NewKey(t)
	spec := itest.FilesSpec(t)
	sb := itest.Acquire(t, b, key, spec)
	ctx := itest.Context(t)
	oldContent, newContent := crashContent("old content\n"), crashContent("NEW CONTENT\n")
	keyJSON, _ := json.Marshal(key)
	labelsJSON, _ := json.Marshal(dockertest.Labels())

	cuts := []int64{4 << 10, 25 << 20, int64(len(newContent)) - 4<<10, 0} // 0: no cut
	for round, cutAt := range cuts {
		if err := sb.WriteFile(ctx, crashFile, oldContent, "."); err != nil {
			t.Fatalf("round %d: write the old content: %v", round, err)
		}
		proxy := newCutProxy(t, cutAt)
		child := exec.Command(os.Args[0], "-test.run=^TestWriteCrashLeavesOldOrNewContent$", "-test.count=1")
		child.Env = append(os.Environ(), crashChildEnv+"="+string(keyJSON), crashLabelsEnv+"="+string(labelsJSON),
			"DOCKER_HOST=unix://"+proxy.path)
		child.Stderr = os.Stderr
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		waitForLine(t, lines, crashReady)
		if cutAt > 0 {
			select {
			case <-proxy.held:
			case <-time.After(2 * time.Minute):
				t.Fatalf("round %d: the upload never reached %d bytes", round, cutAt)
			}
		} else {
			waitForLine(t, lines, crashWrote)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill the writer: %v", round, err)
		}
		_ = child.Wait()
		proxy.Close() // the daemon's side of the upload ends here

		// A fresh engine, as after a restart: its acquire must thaw the guest.
		after := acquireAgain(t, key, spec, archiveOnly()) // staging names and cut uploads are the archive plane's
		got, err := after.ReadFile(ctx, crashFile, ".", 64<<20)
		switch {
		case err != nil:
			t.Fatalf("round %d: read back: %v", round, err)
		case cutAt > 0 && !bytes.Equal(got, oldContent):
			t.Fatalf("round %d (cut after %d bytes): %d bytes, not the whole old content (%d bytes; new: %v)",
				round, cutAt, len(got), len(oldContent), bytes.Equal(got, newContent))
		case cutAt == 0 && !bytes.Equal(got, newContent):
			t.Fatalf("round %d (no cut): %d bytes, not the whole new content", round, len(got))
		}
		var left []string
		for _, line := range strings.Split(itest.Sh(t, after, "ls -lA /maf-sandbox/work"), "\n") {
			if m := stagingEntry.FindStringSubmatch(line); m != nil {
				left = append(left, m[2]+" ("+m[1]+" bytes)")
				if err := after.Remove(ctx, m[2], ".", false); err != nil {
					t.Fatalf("round %d: remove the leftover %s: %v", round, m[2], err)
				}
			}
		}
		t.Logf("round %d (cut after %d bytes): content whole; staging names left: %v", round, cutAt, left)
		if cutAt == 0 && len(left) > 0 {
			t.Fatalf("round %d: a finished write left %v", round, left)
		}
	}
}

// crashChild is the writer of both crash tests: it acquires the parent's sandbox (the key in
// the env variable keyEnv, the parent's labels) on plane, makes one file call (the host plane
// is proven on the first, so the kill lands in the write itself), says it is ready and how
// many bytes it writes, and writes the new content until it is killed.
func crashChild(t *testing.T, keyEnv string, plane actors.Option) {
	var key sandbox.Key
	var labels map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(keyEnv)), &key); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(os.Getenv(crashLabelsEnv)), &labels); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := actors.Create(ctx, docker.Config{Labels: labels, CommandTimeout: 30 * time.Second},
		actors.WithLogger(zap.NewNop()), plane)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Acquire(ctx, key, itest.FilesSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	content := crashContent("NEW CONTENT\n")
	if _, err := sb.StatFile(ctx, crashFile, "."); err != nil {
		t.Fatal(err)
	}
	fmt.Println(crashReady + " " + strconv.Itoa(len(content)))
	if err := sb.WriteFile(ctx, crashFile, content, "."); err != nil {
		t.Fatal(err)
	}
	fmt.Println(crashWrote)
	time.Sleep(time.Minute) // killed long before
}

// acquireAgain acquires key through a new backend on plane (closed when the test ends).
func acquireAgain(t *testing.T, key sandbox.Key, spec sandbox.Spec, plane actors.Option) sandbox.Sandbox {
	t.Helper()
	b := itest.NewBackend(t, plane)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("acquire after the crash: %v", err)
	}
	return sb
}

func waitForLine(t *testing.T, lines *bufio.Scanner, want string) {
	t.Helper()
	for lines.Scan() {
		if strings.Contains(lines.Text(), want) {
			return
		}
	}
	t.Fatalf("the writer ended before saying %q: %v", want, lines.Err())
}

// cutProxy forwards a unix socket to the daemon's. On every connection it watches for an
// archive upload (PUT …/archive) and, when cutAt > 0, stops forwarding once cutAt bytes of it
// (counted from the request line) have passed, closing held. Close drops every connection.
type cutProxy struct {
	path   string
	cutAt  int64
	held   chan struct{}
	ln     net.Listener
	once   sync.Once
	mu     sync.Mutex
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, cutAt int64) *cutProxy {
	t.Helper()
	upstream := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		var ok bool
		if upstream, ok = strings.CutPrefix(h, "unix://"); !ok {
			t.Fatalf("the crash test proxies a unix socket; DOCKER_HOST is %s", h)
		}
	}
	p := &cutProxy{path: filepath.Join(t.TempDir(), "d.sock"), cutAt: cutAt, held: make(chan struct{})}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("unix", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.Close()
				d.Close()
				return
			}
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			itest.Relay(&p.wg, c, d, p.upload)
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// upload copies the client's bytes to the daemon, holding at the cut.
func (p *cutProxy) upload(dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	var seen int64 = -1 // bytes of the upload passed; -1 before one began
	for {
		n, err := src.Read(buf)
		chunk := buf[:n]
		if seen < 0 {
			if i := bytes.Index(chunk, []byte("PUT /")); i >= 0 && bytes.Contains(chunk[i:], []byte("/archive")) {
				seen, chunk = 0, chunk[i:]
				if _, werr := dst.Write(buf[:i]); werr != nil {
					return
				}
			}
		}
		if seen >= 0 && p.cutAt > 0 && seen+int64(len(chunk)) >= p.cutAt {
			_, _ = dst.Write(chunk[:p.cutAt-seen])
			p.once.Do(func() { close(p.held) })
			_, _ = io.Copy(io.Discard, src) // hold: nothing more reaches the daemon
			return
		}
		if seen >= 0 {
			seen += int64(len(chunk))
		}
		if _, werr := dst.Write(chunk); werr != nil || err != nil {
			return
		}
	}
}

func (p *cutProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// stagingNames lists the staging names in dir.
func stagingNames(t *testing.T, sb sandbox.Sandbox, dir string) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(itest.Sh(t, sb, "ls -lA "+dir), "\n") {
		if m := stagingEntry.FindStringSubmatch(line); m != nil {
			names = append(names, m[2])
		}
	}
	return names
}

// A write leaves nothing beside its file, on an image whose user is sandbox (uid 1000): no
// staging name after a new file, an overwrite, a write that creates its parents, a write into
// a directory only root may change (/etc: the guest's rm is refused there, and root's runs,
// every directory from / down being the host's), and a write the daemon refused (over a
// directory). The file is the guest's, mode 0644, with one link.
func TestWriteLeavesNoStagingName(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		image := itest.DerivedImage(t, "true", "USER sandbox")
		b := itest.NewBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithImage(image)))
		ctx := itest.Context(t)
		itest.Sh(t, sb, "mkdir -p /maf-sandbox/work/adir/inner")
		writes := []struct{ path, wd, dir string }{
			{"new.txt", ".", "/maf-sandbox/work"},
			{"new.txt", ".", "/maf-sandbox/work"}, // over the first
			{"a/b/c.txt", ".", "/maf-sandbox/work/a/b"},
			{"maf-write-test.txt", "/etc", "/etc"},
		}
		for _, w := range writes {
			if err := sb.WriteFile(ctx, w.path, []byte("content of "+w.path), w.wd); err != nil {
				t.Fatalf("write %s in %s: %v", w.path, w.wd, err)
			}
			if left := stagingNames(t, sb, w.dir); len(left) > 0 {
				t.Fatalf("write %s in %s left %v", w.path, w.wd, left)
			}
			file := w.dir + "/" + w.path[strings.LastIndex(w.path, "/")+1:]
			if got := strings.TrimSpace(itest.Sh(t, sb, "stat -c '%h %u %a' "+file)); got != "1 1000 644" {
				t.Fatalf("%s: links, owner, mode = %q, want 1 1000 644", file, got)
			}
			if got, err := sb.ReadFile(ctx, w.path, w.wd, 1024); err != nil || string(got) != "content of "+w.path {
				t.Fatalf("read %s back = %q, %v", w.path, got, err)
			}
		}
		if err := sb.WriteFile(ctx, "adir", []byte("x"), "."); err == nil {
			t.Fatal("a write over a directory succeeded")
		}
		if left := stagingNames(t, sb, "/maf-sandbox/work"); len(left) > 0 {
			t.Fatalf("the refused write left %v", left)
		}
		if got := itest.Sh(t, sb, "ls -A /maf-sandbox/work/adir"); strings.TrimSpace(got) != "inner" {
			t.Fatalf("the refused write changed the directory: %q", got)
		}
	})
}

// Where neither the guest nor (by the reach rule) root may remove a staging name, a root-owned
// directory inside the guest's base, the first write leaves its staging name (a second link
// to the complete file, never the file itself) and later writes there go in place.
func TestWriteIntoAnUnremovableDirectoryStopsStaging(t *testing.T) {
	image := itest.DerivedImage(t, "mkdir -p /home/sandbox/ro && chown 1000:1000 /home/sandbox", "USER sandbox")
	b := itest.NewBackend(t, archiveOnly()) // staging names and cut uploads are the archive plane's
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithImage(image), sandbox.WithWorkDir("/home/sandbox")))
	ctx := itest.Context(t)
	for i, content := range []string{"first", "second"} {
		if err := sb.WriteFile(ctx, "ro/f.txt", []byte(content), "."); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got, err := sb.ReadFile(ctx, "ro/f.txt", ".", 1024); err != nil || string(got) != content {
			t.Fatalf("read back %d = %q, %v", i, got, err)
		}
		if left := stagingNames(t, sb, "/home/sandbox/ro"); len(left) != 1 {
			t.Fatalf("after write %d: staging names %v, want the first write's one", i, left)
		}
	}
}

// An image without rm cannot remove a staging name, so its writes go in place: the content
// lands, nothing is left beside it.
func TestWriteWithoutRmGoesInPlace(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		image := itest.DerivedImage(t, "rm /bin/rm", "USER sandbox")
		b := itest.NewBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)))
		ctx := itest.Context(t)
		if res, err := sb.Exec(ctx, sandbox.Argv("rm", "-rf", "--"), "/", 30*time.Second); err == nil && res.ExitCode == 0 {
			t.Fatal("the derived image still runs rm")
		}
		for _, content := range []string{"first", "second"} {
			if err := sb.WriteFile(ctx, "f.txt", []byte(content), "."); err != nil {
				t.Fatal(err)
			}
			if got, err := sb.ReadFile(ctx, "f.txt", ".", 1024); err != nil || string(got) != content {
				t.Fatalf("read back = %q, %v", got, err)
			}
		}
		if left := stagingNames(t, sb, "/maf-sandbox/work"); len(left) > 0 {
			t.Fatalf("left %v", left)
		}
	})
}

// archiveOnly forces the archive plane, for what only it has: staging names (the host plane
// renames a temporary name, atomically, with no rm) and uploads through the daemon.
func archiveOnly() actors.Option { return actors.WithFilePlane(actors.FilePlaneArchive) }
