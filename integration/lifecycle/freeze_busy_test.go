package lifecycle

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestFreezeBusyGuest: file calls on a guest busy forking and writing, each under a freeze
// that cgroup v1's freezer now and again gives up on ("unable to freeze"). The backend
// retries the pause (unpausing first), so every call succeeds or, should the freezer give up
// on every attempt, fails with *actors.FreezeError wrapping docker.ErrFreezeFailed, never as
// a guest result; after the calls the guest runs. The refusal is load-dependent: the log
// says how many retries this run needed. The calls go over the archive file plane, the one
// that freezes.
func TestFreezeBusyGuest(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	b := itest.NewBackend(t, actors.WithLogger(zap.New(core)), actors.WithFilePlane(actors.FilePlaneArchive))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	busy := "for i in 1 2 3 4 5 6 7 8; do (while :; do /bin/true; done) >/dev/null 2>&1 & done; " +
		"for i in 1 2; do (while :; do dd if=/dev/zero of=/tmp/busy$i bs=64k count=16; sync; done) >/dev/null 2>&1 & done"
	if res, err := sb.Exec(itest.Context(t), sandbox.Shell(busy), "/", time.Minute); err != nil || res.ExitCode != 0 {
		t.Fatalf("start the busy guest: %+v, %v", res, err)
	}
	if err := sb.WriteFile(itest.Context(t), "probe.txt", []byte("probe"), "."); err != nil {
		t.Fatalf("write the probe: %v", err)
	}
	failed := 0
	stop := time.Now().Add(60 * time.Second)
	for i := 0; i < 150 && time.Now().Before(stop); i++ {
		b, err := sb.ReadFile(itest.Context(t), "probe.txt", ".", 64)
		var fe *actors.FreezeError
		switch {
		case err == nil && string(b) == "probe":
		case errors.As(err, &fe) && errors.Is(err, docker.ErrFreezeFailed):
			failed++
			t.Logf("read %d: %v", i, err)
		default:
			t.Fatalf("read %d: %q, %v; want the probe or a FreezeError", i, b, err)
		}
	}
	retries := logs.FilterMessage("the freezer gave up on a busy guest; pausing again").Len()
	t.Logf("%d pause retries absorbed, %d calls refused after every retry", retries, failed)
	if res, err := sb.Exec(itest.Context(t), sandbox.Argv("echo", "ran"), "/", time.Minute); err != nil || res.Stdout() != "ran\n" {
		t.Fatalf("exec after the calls: %+v, %v; want the guest running", res, err)
	}
}
