package process

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// auditWatch collects the process events of the audit stream as they are published.
type auditWatch struct {
	mu  sync.Mutex
	got []events.AuditEvent
	ch  chan struct{}
}

func watchAudit(t *testing.T, nc *nats.Conn) *auditWatch {
	t.Helper()
	w := &auditWatch{ch: make(chan struct{}, 1)}
	sub, err := nc.Subscribe(events.DefaultSubjectPrefix+".audit.>", func(m *nats.Msg) {
		var ev events.AuditEvent
		if json.Unmarshal(m.Data, &ev) != nil || ev.Process == nil {
			return
		}
		w.mu.Lock()
		w.got = append(w.got, ev)
		w.mu.Unlock()
		select {
		case w.ch <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return w
}

// wait returns the event of typ for process id, waiting for it.
func (w *auditWatch) wait(t *testing.T, typ, id string) events.AuditEvent {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		for _, ev := range w.got {
			if ev.Type == typ && ev.Process.ID == id {
				w.mu.Unlock()
				return ev
			}
		}
		w.mu.Unlock()
		select {
		case <-w.ch:
		case <-deadline:
			t.Fatalf("no %s event for %s", typ, id)
		}
	}
}

// hostProcesses lists the host's processes whose command line holds marker.
func hostProcesses(t *testing.T, marker string) []string {
	t.Helper()
	out, err := exec.Command("ps", "-eo", "pid,args").Output()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, marker) && !strings.Contains(l, "ps -eo") {
			found = append(found, strings.TrimSpace(l))
		}
	}
	return found
}

// TestProcessEventsAndDisposal: each start and end is a process.started and process.exited
// event on the audit stream (through the observer seam, as engine serve wires it), and a
// disposal ends the sandbox's processes and says so, a daemonised one that ignores SIGTERM and
// SIGHUP included: none survives on the host.
func TestProcessEventsAndDisposal(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	ev, err := events.New(itest.Context(t), nc, events.WithRecoveryEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(itest.Context(t)) })
	store, err := ev.Processes()
	if err != nil {
		t.Fatal(err)
	}
	b := channelBackend(t, actors.WithProcessStore(store))
	if _, err := b.ReportTo(ev); err != nil { // as a router built with ev hands it over
		t.Fatal(err)
	}
	audit := watchAudit(t, natstest.Connect(t, srv))
	key := itest.NewKey(t)
	sb := itest.Acquire(t, b, key, itest.BusyboxSpec(t)).(*actors.Sandbox)

	start(t, sb, sandbox.ProcessSpec{ID: "quick", Command: sandbox.Shell("echo done; exit 3")})
	if e := audit.wait(t, events.AuditProcessExited, "quick"); *e.Process.ExitCode != 3 || e.Process.Reason != "exited" || e.Process.Output != 5 || e.Key.Scope != key.Scope {
		t.Fatalf("process.exited: %+v %+v", e, e.Process)
	}
	if e := audit.wait(t, events.AuditProcessStarted, "quick"); e.Process.Argv0 != "sh" || !e.Process.Durable || e.InstanceID != sb.InstanceID() {
		t.Fatalf("process.started: %+v %+v", e, e.Process)
	}

	marker := fmt.Sprint(40000 + rand.IntN(20000))
	start(t, sb, sandbox.ProcessSpec{ID: "stubborn", Command: sandbox.Shell(
		"trap '' TERM HUP; setsid sh -c \"trap '' TERM HUP; while :; do sleep " + marker + "; done\" & while :; do sleep " + marker + "; done")})
	for len(hostProcesses(t, "sleep "+marker)) < 2 {
		time.Sleep(50 * time.Millisecond)
	}
	if f := b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	e := audit.wait(t, events.AuditProcessExited, "stubborn")
	if e.Process.Reason != string(sandbox.ExitDisposed) || e.Process.Signal != int(sandbox.SIGKILL) {
		t.Fatalf("the disposed process: %+v", e.Process)
	}
	if left := hostProcesses(t, "sleep "+marker); len(left) > 0 {
		t.Fatalf("processes outlived their sandbox's disposal: %v", left)
	}
}
