package events

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/mafsandbox/engine/sandbox"
)

// Processes' starts and ends on the audit stream: the one place where the protocol's
// process events (sandbox.ProcessStarted, sandbox.ProcessExited, reported through the
// observer seam) become audit events.

// Audit event types of processes.
const (
	AuditProcessStarted = "process.started"
	AuditProcessExited  = "process.exited"
)

// AuditProcess is a process's detail: its ID, its program's name (never the command line),
// how it runs, and for process.exited how it ended and how much it wrote.
type AuditProcess struct {
	ID        string `json:"id"`
	PID       int    `json:"pid,omitempty"`
	Argv0     string `json:"argv0,omitempty"`
	Transport string `json:"transport"`
	Durable   bool   `json:"durable"`
	Terminal  bool   `json:"terminal,omitempty"`
	Reason    string `json:"reason,omitempty"`   // process.exited: exited, signalled, timed_out, oom_killed, killed_at_disposal, lost
	ExitCode  *int   `json:"exitCode,omitempty"` // process.exited
	Signal    int    `json:"signal,omitempty"`   // process.exited: the signal that ended it
	Output    int64  `json:"outputBytes"`
}

// Processes is the observer (sandbox.ProcessObserver's) that records each process's start
// and end on the audit stream. Each event's ID is a function of the instance, the process
// and the act, so an end reported again (by an engine that followed the process again after
// another stopped) is kept once within the stream's duplicate window.
func (s *AuditSink) Processes() sandbox.Observer { return processAudit{s: s} }

type processAudit struct {
	sandbox.NopObserver
	s *AuditSink
}

func (a processAudit) ProcessStarted(ev sandbox.ProcessStarted) {
	a.s.Record(processEvent(AuditProcessStarted, ev.Key, ev.Kind, ev.InstanceID, ev.Process))
}

func (a processAudit) ProcessExited(ev sandbox.ProcessExited) {
	a.s.Record(processEvent(AuditProcessExited, ev.Key, ev.Kind, ev.InstanceID, ev.Process))
}

func processEvent(typ string, key sandbox.Key, kind, instance string, p sandbox.Process) AuditEvent {
	sum := sha256.Sum256([]byte(instance + "\x00" + p.ID + "\x00" + typ))
	d := &AuditProcess{ID: p.ID, PID: p.PID, Transport: string(p.Transport), Durable: p.Durable, Terminal: p.Terminal != nil, Output: p.Output}
	if len(p.Argv) > 0 {
		d.Argv0 = truncate(p.Argv[0], 120)
	}
	ev := AuditEvent{Type: typ, ID: "aud_" + hex.EncodeToString(sum[:20]), Key: &EventKey{Scope: key.Scope, ThreadID: key.ThreadID, AgentID: key.AgentID, CallID: key.CallID}, Kind: kind, InstanceID: instance,
		Outcome: OutcomeOK, Process: d}
	if e := p.Exit; e != nil && typ == AuditProcessExited {
		code := e.ExitCode
		d.Reason, d.ExitCode, d.Signal = string(e.Reason), &code, int(e.Signal)
	}
	return ev
}
