package hostfs

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// The crash test's child reads its container and the size to write from these.
const (
	crashContainerEnv = "MAF_HOSTFS_CRASH_CONTAINER"
	crashSizeEnv      = "MAF_HOSTFS_CRASH_SIZE"
)

// stagingName is the form of a write's temporary name.
var stagingName = regexp.MustCompile(`^\.maf-write-[0-9a-f]{32}$`)

// TestCrashWriterChild is the writer TestWriteKilledMidwayLeavesOldOrNew kills: run in a
// process of its own (this test binary again), it attaches to the container and writes
// crashSizeEnv bytes of 'n' over /tmp/f in one Write. Run directly, it skips.
func TestCrashWriterChild(t *testing.T) {
	id := os.Getenv(crashContainerEnv)
	if id == "" {
		t.Skip("the child of TestWriteKilledMidwayLeavesOldOrNew")
	}
	size, err := strconv.Atoi(os.Getenv(crashSizeEnv))
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{'n'}, size)
	if err := attachTo(t, id).Write(context.Background(), "f", "/tmp", body, Owner{UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteKilledMidwayLeavesOldOrNew: a writing process SIGKILLed in the middle of a large
// write, at a random point once its temporary name holds bytes, leaves the target with the
// old content or the new, never a mix; what it leaves besides is only its temporary name, of
// the fixed staging form, never the target's name.
func TestWriteKilledMidwayLeavesOldOrNew(t *testing.T) {
	r, id := containerRoot(t)
	old := append([]byte("old\n"), bytes.Repeat([]byte{'o'}, 1<<20)...)
	if err := r.Write(context.Background(), "f", "/tmp", old, Owner{}); err != nil {
		t.Fatal(err)
	}
	const newSize = 96 << 20 // a few hundred ms through fuse-overlayfs: room to land a kill
	dir := fmt.Sprintf("/proc/%d/root/tmp", r.Pid())
	killedMidway := 0
	left := map[string]bool{} // the temporaries of earlier rounds
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashWriterChild$", "-test.count", "1")
		cmd.Env = append(os.Environ(), crashContainerEnv+"="+id, crashSizeEnv+"="+strconv.Itoa(newSize))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Wait until a temporary holds bytes, then kill at a random point of the write.
		var waitErr error
		done := false
		for deadline := time.Now().Add(time.Minute); !done; {
			select {
			case waitErr = <-exited:
				done = true
				continue
			default:
			}
			if name := writing(t, dir, left); name != "" {
				left[name] = true
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				waitErr = <-exited
				done = true
				continue
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: the child never started writing: %s", round, out.String())
			}
			time.Sleep(time.Millisecond)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case bytes.Equal(got, old):
		case len(got) == newSize && bytes.Count(got, []byte{'n'}) == newSize:
		default:
			t.Fatalf("round %d (child: %v): the target holds %d bytes, neither the old content nor the new", round, waitErr, len(got))
		}
		ws, ok := waitErr.(*exec.ExitError)
		if ok && ws.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL && bytes.Equal(got, old) {
			killedMidway++
		} else if waitErr != nil && !ok {
			t.Fatalf("round %d: %v: %s", round, waitErr, out.String())
		}
	}
	if killedMidway == 0 {
		t.Fatal("no round killed the writer before its rename: the test proved nothing")
	}
	// What the killed writers left: their temporaries, nothing under any other name.
	temporaries := 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case n == "f":
		case stagingName.MatchString(n):
			temporaries++
		default:
			t.Errorf("an entry %q appeared beside the target", n)
		}
	}
	t.Logf("%d of 6 writers killed before their rename; %d temporaries left", killedMidway, temporaries)
}

// writing returns a temporary name in dir, not among seen, that holds bytes, or "".
func writing(t *testing.T, dir string, seen map[string]bool) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !stagingName.MatchString(e.Name()) || seen[e.Name()] {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() > 0 {
			return e.Name()
		}
	}
	return ""
}

// TestReaderNeverSeesATornWrite: a guest reading the target in a loop while the host rewrites
// it, alternating two contents, only ever reads one of them whole. An in-place rewrite of the
// same sizes, the control, is logged: it shows the guest's check can see a torn file.
func TestReaderNeverSeesATornWrite(t *testing.T) {
	r, id := containerRoot(t)
	ctx := context.Background()
	a, b := bytes.Repeat([]byte{'a'}, 512<<10), bytes.Repeat([]byte{'b'}, 512<<10)
	sum := func(p []byte) string { s := md5.Sum(p); return hex.EncodeToString(s[:]) }
	if err := r.Write(ctx, "f", "/tmp", a, Owner{}); err != nil {
		t.Fatal(err)
	}
	rewrite := func(inPlace bool, i int) error {
		body := a
		if i%2 == 1 {
			body = b
		}
		if inPlace {
			return os.WriteFile(fmt.Sprintf("/proc/%d/root/tmp/f", r.Pid()), body, 0o644)
		}
		return r.Write(ctx, "f", "/tmp", body, Owner{})
	}
	for _, inPlace := range []bool{false, true} {
		name := map[bool]string{false: "host plane", true: "in-place control"}[inPlace]
		_ = os.Remove(fmt.Sprintf("/proc/%d/root/tmp/stop", r.Pid()))
		// The guest counts whole reads and torn ones until told to stop.
		script := fmt.Sprintf(`good=0; torn=0
while [ ! -e /tmp/stop ]; do
  case "$(md5sum < /tmp/f)" in %s*|%s*) good=$((good+1));; *) torn=$((torn+1));; esac
done
echo "$good $torn" > /tmp/reads.tmp && mv /tmp/reads.tmp /tmp/reads`, sum(a), sum(b))
		_ = os.Remove(fmt.Sprintf("/proc/%d/root/tmp/reads", r.Pid()))
		dockertest.Docker(t, "exec", "-d", id, "sh", "-c", script)
		for i := 0; i < 400; i++ {
			if err := rewrite(inPlace, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Write(ctx, "stop", "/tmp", nil, Owner{}); err != nil {
			t.Fatal(err)
		}
		var reads []byte
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			var err error
			if reads, err = r.Read(ctx, "reads", "/tmp", 100); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the guest loop did not report: %v", name, err)
			}
		}
		var good, torn int
		if _, err := fmt.Sscan(strings.TrimSpace(string(reads)), &good, &torn); err != nil {
			t.Fatalf("%s: guest reported %q", name, reads)
		}
		t.Logf("%s: the guest read %d whole files and %d torn ones during 400 rewrites", name, good, torn)
		if !inPlace && (torn != 0 || good == 0) {
			t.Fatalf("%s: %d torn reads, %d whole", name, torn, good)
		}
	}
}
