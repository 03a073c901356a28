package execchan

import (
	"slices"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// channelSandbox acquires a busybox sandbox on a backend that has the supervisor, and
// returns the engine that counts its driver's execs.
func channelSandbox(t *testing.T) (*actors.Sandbox, *itest.CountingEngine) {
	t.Helper()
	b, eng := itest.NewCountingBackend(t, actors.WithExecChannel(itest.ExecSupervisor(t)))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	return sb.(*actors.Sandbox), eng
}

// run runs cmd and fails the test on an error.
func run(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) sandbox.ExecResult {
	t.Helper()
	r, err := sb.Exec(itest.Context(t), cmd, "", time.Minute)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return r
}

// driverExecs counts the execs that went through docker exec since the last Reset.
func driverExecs(eng *itest.CountingEngine) int {
	n := 0
	for _, op := range eng.Seen() {
		if op == "exec" {
			n++
		}
	}
	return n
}

// onChannel fails the test unless the commands since the last Reset all took the channel.
func onChannel(t *testing.T, eng *itest.CountingEngine) {
	t.Helper()
	if n := driverExecs(eng); n != 0 {
		t.Fatalf("%d commands went through docker exec (%v), not the channel", n, eng.Seen())
	}
}

// onDockerExec fails the test unless some command since the last Reset took docker exec.
func onDockerExec(t *testing.T, eng *itest.CountingEngine) {
	t.Helper()
	if !slices.Contains(eng.Seen(), "exec") {
		t.Fatalf("no command went through docker exec (%v): the channel was used", eng.Seen())
	}
}
