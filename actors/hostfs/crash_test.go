package hostfs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
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

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// The crash test's child reads where to write and how much from these.
const (
	crashContainerEnv = "MAF_HOSTFS_CRASH_CONTAINER"
	crashDirEnv       = "MAF_HOSTFS_CRASH_DIR"
	crashSizeEnv      = "MAF_HOSTFS_CRASH_SIZE"
)

// stagingName is the form of a write's temporary name.
var stagingName = regexp.MustCompile(`^\.maf-write-[0-9a-f]{32}$`)

// crashWriterChild is the writer TestWriteKilledMidwayLeavesOldOrNew kills: that test re-run
// in a process of its own (this test binary again, with crashContainerEnv or crashDirEnv
// set), it attaches to the container (or takes the host directory as its root) and writes
// crashSizeEnv bytes of 'n' over /tmp/f in one Write, saying "writing" on stdout just before.
func crashWriterChild(t *testing.T, id, dir string) {
	size, err := strconv.Atoi(os.Getenv(crashSizeEnv))
	if err != nil {
		t.Fatal(err)
	}
	var r *Root
	if id != "" {
		r = attachTo(t, id)
	} else {
		r = &Root{id: "test", openRoot: func() (int, error) {
			return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}}
	}
	body := bytes.Repeat([]byte{'n'}, size)
	fmt.Println("writing")
	if err := r.Write(context.Background(), "f", "/tmp", body, Owner{UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteKilledMidwayLeavesOldOrNew: a writing process SIGKILLed at a random point of a
// large write leaves the target with the old content (or none, when there was none) or the
// new, never a mix; what it leaves besides is at most its temporary name, of the fixed
// staging form, and none at all when it wrote an absent target through an unnamed file. On a
// container's root (fuse-overlayfs here: no unnamed files) and on a host directory (ext4 here).
func TestWriteKilledMidwayLeavesOldOrNew(t *testing.T) {
	if id, dir := os.Getenv(crashContainerEnv), os.Getenv(crashDirEnv); id != "" || dir != "" {
		crashWriterChild(t, id, dir)
		return
	}
	dockertest.RequireRoot(t)
	croot, id := containerRoot(t)
	host := t.TempDir()
	if err := os.Mkdir(filepath.Join(host, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env, dir string
		replace        bool // the target exists before each round
		unnamed        bool // the write goes through an unnamed file: nothing may be left
	}{
		{"container/replace", crashContainerEnv + "=" + id, fmt.Sprintf("/proc/%d/root/tmp", croot.Pid()), true, false},
		{"container/new", crashContainerEnv + "=" + id, fmt.Sprintf("/proc/%d/root/tmp", croot.Pid()), false, false},
		{"hostdir/replace", crashDirEnv + "=" + host, filepath.Join(host, "tmp"), true, false},
		{"hostdir/new", crashDirEnv + "=" + host, filepath.Join(host, "tmp"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) { killWriters(t, tc.env, tc.dir, tc.replace, tc.unnamed) })
	}
}

// killWriters runs six writers over dir/f, each killed at a random point, and checks what
// each left.
func killWriters(t *testing.T, env, dir string, replace, unnamed bool) {
	const newSize = 96 << 20 // tens to hundreds of ms to write: room to land a kill
	old := append([]byte("old\n"), bytes.Repeat([]byte{'o'}, 1<<20)...)
	target := filepath.Join(dir, "f")
	before := map[string]bool{}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			before[e.Name()] = true
		}
	}
	killedMidway := 0
	for round := range 6 {
		_ = os.Remove(target)
		if replace {
			if err := os.WriteFile(target, old, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestWriteKilledMidwayLeavesOldOrNew$", "-test.count", "1")
		cmd.Env = append(os.Environ(), env, crashSizeEnv+"="+strconv.Itoa(newSize))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line == "writing\n" {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		waitErr := cmd.Wait()
		var exit *exec.ExitError
		killed := errors.As(waitErr, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if waitErr != nil && !killed {
			t.Fatalf("round %d: the child: %v (said %q)", round, waitErr, line)
		}
		got, err := os.ReadFile(target)
		switch {
		case err != nil && !replace && os.IsNotExist(err):
			killedMidway++
		case err != nil:
			t.Fatal(err)
		case replace && bytes.Equal(got, old):
			killedMidway++
		case len(got) == newSize && bytes.Count(got, []byte{'n'}) == newSize:
		default:
			t.Fatalf("round %d (killed %t): the target holds %d bytes, neither the old content nor the new", round, killed, len(got))
		}
	}
	if killedMidway == 0 {
		t.Fatal("no round killed the writer before its rename or link: the test proved nothing")
	}
	temporaries := 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case before[n], n == "f":
		case stagingName.MatchString(n) && !unnamed:
			temporaries++
		default:
			t.Errorf("an entry %q appeared beside the target", n)
		}
	}
	t.Logf("%d of 6 writers killed before their rename or link; %d temporaries left", killedMidway, temporaries)
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
