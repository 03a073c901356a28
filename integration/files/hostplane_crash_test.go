package files

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// The host plane's crash child: the key to acquire, JSON (the labels ride crashLabelsEnv).
const hostCrashChildEnv = "MAF_SANDBOX_HOST_WRITE_CRASH_CHILD"

// hostStaging is the host plane's temporary name.
var hostStaging = regexp.MustCompile(`^\.maf-write-[0-9a-f]{32}$`)

// An engine SIGKILLed while it writes a 50 MiB file over the host plane leaves the file whole:
// a fresh engine reads the complete old content, or the new, never a mix. The writer is a real
// engine process (this test binary re-run) with the host plane forced; it is killed at a
// random point once its temporary name holds bytes. What it leaves is only that name, of the
// staging form, beside the file, which the fresh engine can remove. A last round lets the
// write finish: the new content whole, nothing left.
func TestHostPlaneWriteCrashLeavesOldOrNewContent(t *testing.T) {
	if os.Getenv(hostCrashChildEnv) != "" {
		crashChild(t, hostCrashChildEnv, actors.WithFilePlane(actors.FilePlaneHost))
		return
	}
	if !slices.Contains(itest.FilePlanes(t), actors.FilePlaneHost) {
		t.Skip("the host plane is not among this pass's planes")
	}
	dockertest.RequireRoot(t)
	host := actors.WithFilePlane(actors.FilePlaneHost)
	b := itest.NewBackend(t, host)
	key := itest.NewKey(t)
	spec := itest.FilesSpec(t)
	sb := itest.Acquire(t, b, key, spec)
	ctx := itest.Context(t)
	oldContent, newContent := crashContent("old content\n"), crashContent("NEW CONTENT\n")
	keyJSON, _ := json.Marshal(key)
	labelsJSON, _ := json.Marshal(dockertest.Labels())
	pid := dockertest.Docker(t, "inspect", "--format", "{{.State.Pid}}", sb.InstanceID())
	work := filepath.Join("/proc", pid, "root", "maf-sandbox/work")

	killedBeforeRename := 0
	for round := range 4 {
		finish := round == 3
		if err := sb.WriteFile(ctx, crashFile, oldContent, "."); err != nil {
			t.Fatalf("round %d: write the old content: %v", round, err)
		}
		child := exec.Command(os.Args[0], "-test.run=^TestHostPlaneWriteCrashLeavesOldOrNewContent$", "-test.count=1")
		child.Env = append(os.Environ(), hostCrashChildEnv+"="+string(keyJSON), crashLabelsEnv+"="+string(labelsJSON))
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
		if finish {
			waitForLine(t, lines, crashWrote)
		} else {
			waitForStaging(t, work)
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill the writer: %v", round, err)
		}
		_ = child.Wait()

		after := acquireAgain(t, key, spec, host)
		got, err := after.ReadFile(ctx, crashFile, ".", 64<<20)
		switch {
		case err != nil:
			t.Fatalf("round %d: read back: %v", round, err)
		case bytes.Equal(got, oldContent) && !finish:
			killedBeforeRename++
		case bytes.Equal(got, newContent):
		default:
			t.Fatalf("round %d: %d bytes, neither the whole old content nor the whole new", round, len(got))
		}
		var left []string
		entries, err := os.ReadDir(work)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			switch n := e.Name(); {
			case n == crashFile:
			case hostStaging.MatchString(n):
				left = append(left, n)
				if err := after.Remove(ctx, n, ".", false); err != nil {
					t.Fatalf("round %d: remove the leftover %s: %v", round, n, err)
				}
			default:
				t.Errorf("round %d: %q appeared beside the file", round, n)
			}
		}
		t.Logf("round %d (finish %t): content whole; temporaries left: %v", round, finish, left)
		if finish && len(left) > 0 {
			t.Fatalf("round %d: a finished write left %v", round, left)
		}
	}
	if killedBeforeRename == 0 {
		t.Fatal("no writer was killed before its rename: the test proved nothing")
	}
}

// waitForStaging returns once a temporary name in dir holds bytes.
func waitForStaging(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if info, err := e.Info(); err == nil && hostStaging.MatchString(e.Name()) && info.Size() > 0 {
				return
			}
		}
	}
	t.Fatal("the writer's temporary never held a byte")
}
