package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/mafsandbox/engine/sandbox"
)

// Processes' starts and ends on the audit stream: the one place where the protocol's
// process acts (sandbox.ProcessStarted, sandbox.ProcessExited, reported through the
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
	Reason    string `json:"reason,omitempty"`    // process.exited: exited, signalled, timed_out, oom_killed, killed_at_disposal, lost
	ExitCode  *int   `json:"exit_code,omitempty"` // process.exited
	Signal    int    `json:"signal,omitempty"`    // process.exited: the signal that ended it
	Output    int64  `json:"output_bytes"`
}

// ProcessStarted records a process's start. Its ID is a function of the instance, the
// process and the act, so a start or an end reported again (by an engine that followed the
// process again after another stopped) is kept once within the stream's duplicate window.
func (e *Events) ProcessStarted(ctx context.Context, a sandbox.ProcessStarted) {
	e.audit.Record(processEvent(ctx, AuditProcessStarted, a.Act, a.Process))
}

// ProcessExited records a process's end, as ProcessStarted its start.
func (e *Events) ProcessExited(ctx context.Context, a sandbox.ProcessExited) {
	e.audit.Record(processEvent(ctx, AuditProcessExited, a.Act, a.Process))
}

func processEvent(ctx context.Context, typ string, a sandbox.Act, p sandbox.Process) AuditEvent {
	sum := sha256.Sum256([]byte(a.InstanceID + "\x00" + p.ID + "\x00" + typ))
	ev := auditOf(ctx, typ, a)
	ev.ID = "aud_" + hex.EncodeToString(sum[:20])
	d := &AuditProcess{ID: p.ID, PID: p.PID, Transport: string(p.Transport), Durable: p.Durable, Terminal: p.Terminal != nil, Output: p.Output}
	if len(p.Argv) > 0 {
		d.Argv0 = sandbox.Clip(p.Argv[0], 120)
	}
	if e := p.Exit; e != nil && typ == AuditProcessExited {
		code := e.ExitCode
		d.Reason, d.ExitCode, d.Signal = string(e.Reason), &code, int(e.Signal)
	}
	ev.Process = d
	return ev
}
