package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/moby/moby/client"
)

// The crash test re-runs this test binary as the writer: these variables tell the child what
// to acquire and write. The child is killed before it can report anything else.
const (
	crashChildEnv  = "MAF_SANDBOX_WRITE_CRASH_CHILD" // the key, JSON
	crashLabelsEnv = "MAF_SANDBOX_WRITE_CRASH_LABELS"
	crashReady     = "write-crash-child: acquired"
	crashFile      = "big.bin"
	crashSize      = 50 << 20
)

// stagingEntry matches a staging name in `ls -lA` output: its size and its name.
var stagingEntry = regexp.MustCompile(`\s(\d+)\s+\w+\s+\d+\s+[\d:]+\s+(\.maf-write-[0-9a-f]{32})$`)

func crashContent(fill string) []byte { return bytes.Repeat([]byte(fill), crashSize/len(fill)) }

// An engine killed (SIGKILL) while it writes a 50 MiB file leaves the file whole: the next
// acquire thaws the guest and finds the complete old content or the complete new one, never a
// mix. The writer is a real process (this test binary re-run), killed at several points after
// its archive began to reach the daemon; at least one kill must have cut a transfer (leaving a
// partial staging name behind), or the test proved nothing.
func TestWriteCrashLeavesOldOrNewContent(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild(t)
		return
	}
	dockertest.Require(t)
	b := newBackend(t)
	key := newKey(t)
	spec := filesSpec(t)
	sb := acquire(t, b, key, spec)
	ctx := ctxT(t)
	oldContent, newContent := crashContent("old content\n"), crashContent("NEW CONTENT\n")

	daemon, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	id := sb.InstanceID()

	// Where a write's time goes here: from the freeze through its first entry reaching the
	// daemon (the directory changes) to its return. The kills are spread over the last part.
	before := dirMtime(t, daemon, id)
	done := make(chan time.Time, 1)
	begin := time.Now()
	go func() {
		err := sb.WriteFile(ctx, "calibrate.bin", newContent, ".")
		if err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	frozen, reached := watchWrite(t, daemon, id, before)
	end := <-done
	t.Logf("a %d MiB write here: frozen after %s, reached the daemon after %s, returned after %s",
		crashSize>>20, frozen.Sub(begin), reached.Sub(begin), end.Sub(begin))
	transfer := end.Sub(reached)

	keyJSON, _ := json.Marshal(key)
	labelsJSON, _ := json.Marshal(dockertest.Labels())
	midTransfer := 0
	for round, frac := range []float64{0, 0.2, 0.4, 0.6} {
		if err := sb.WriteFile(ctx, crashFile, oldContent, "."); err != nil {
			t.Fatalf("round %d: write the old content: %v", round, err)
		}
		before := dirMtime(t, daemon, id)
		child := exec.Command(os.Args[0], "-test.run=^TestWriteCrashLeavesOldOrNewContent$", "-test.count=1")
		child.Env = append(os.Environ(), crashChildEnv+"="+string(keyJSON), crashLabelsEnv+"="+string(labelsJSON))
		child.Stderr = os.Stderr
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		waitForLine(t, out, crashReady)
		_, reached := watchWrite(t, daemon, id, before)
		time.Sleep(time.Duration(frac*float64(transfer)) - time.Since(reached))
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill the writer: %v", round, err)
		}
		_ = child.Wait()

		// A fresh engine, as after a restart: its acquire must thaw the guest.
		after := acquireAgain(t, key, spec)
		got, err := after.ReadFile(ctx, crashFile, ".", 64<<20)
		switch {
		case err != nil:
			t.Fatalf("round %d: read back: %v", round, err)
		case bytes.Equal(got, oldContent):
			t.Logf("round %d (kill at %.0f%%): the old content is whole", round, frac*100)
		case bytes.Equal(got, newContent):
			t.Logf("round %d (kill at %.0f%%): the new content is whole", round, frac*100)
		default:
			t.Fatalf("round %d (kill at %.0f%%): torn file: %d bytes, neither the old nor the new %d",
				round, frac*100, len(got), crashSize)
		}
		listing := sh(t, after, "ls -lA /maf-sandbox/work")
		for _, line := range strings.Split(listing, "\n") {
			m := stagingEntry.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			size, _ := strconv.Atoi(m[1])
			t.Logf("round %d: left %s, %d bytes", round, m[2], size)
			if size < crashSize {
				midTransfer++
			}
			if err := after.Remove(ctx, m[2], ".", false); err != nil {
				t.Fatalf("round %d: remove the leftover %s: %v", round, m[2], err)
			}
		}
	}
	if midTransfer == 0 {
		t.Fatal("no kill landed during a transfer (no partial staging name was left): the rounds proved nothing")
	}
}

// crashChild is the writer: it acquires the parent's sandbox with the parent's labels, says
// so, and writes the new content until it is killed.
func crashChild(t *testing.T) {
	var key sandbox.Key
	var labels map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(crashChildEnv)), &key); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(os.Getenv(crashLabelsEnv)), &labels); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := actors.Create(ctx, docker.Config{Driver: testDriver(), Labels: labels, CommandTimeout: 30 * time.Second},
		actors.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Acquire(ctx, key, filesSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	content := crashContent("NEW CONTENT\n")
	fmt.Println(crashReady)
	if err := sb.WriteFile(ctx, crashFile, content, "."); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute) // killed long before
}

// acquireAgain acquires key through a new backend (closed when the test ends).
func acquireAgain(t *testing.T, key sandbox.Key, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	b := newBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("acquire after the crash: %v", err)
	}
	return sb
}

func waitForLine(t *testing.T, r interface{ Read([]byte) (int, error) }, want string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return
		}
	}
	t.Fatalf("the writer ended before saying %q: %v", want, sc.Err())
}

// dirMtime is the storage base's modification time, from the daemon's stat of it (served
// while the guest is frozen).
func dirMtime(t *testing.T, daemon *client.Client, id string) time.Time {
	t.Helper()
	res, err := daemon.ContainerStatPath(context.Background(), id, client.ContainerStatPathOptions{Path: "/maf-sandbox/work"})
	if err != nil {
		t.Fatalf("stat the storage base: %v", err)
	}
	return res.Stat.Mtime
}

func paused(t *testing.T, daemon *client.Client, id string) bool {
	t.Helper()
	info, err := daemon.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	return info.Container.State.Paused
}

// watchWrite polls the container until a write has frozen it and its first entry has reached
// the daemon (the storage base's modification time differs from before), and returns when it
// saw each.
func watchWrite(t *testing.T, daemon *client.Client, id string, before time.Time) (frozen, reached time.Time) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if frozen.IsZero() && paused(t, daemon, id) {
			frozen = time.Now()
		}
		if !dirMtime(t, daemon, id).Equal(before) {
			reached = time.Now()
			if frozen.IsZero() {
				frozen = reached
			}
			return frozen, reached
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no write reached the daemon")
	return
}
