package service

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox/hosttools"
)

// Host-tool call events: one per call of a run_program, published on core NATS next to the
// egress events (same prefix, headers and key shape; docs/events.md).
const (
	// SubjectHostToolCalledT is <event prefix>.host_tools.called.<Token(scope)>.<Token(kind)>.
	SubjectHostToolCalledT = "%s.host_tools.called.%s.%s"
	SchemaHostToolCalled   = "maf.sandbox.host_tools.called/v1"
	TypeHostToolCalled     = "host_tools.called.v1"
)

// HostToolCalledEvent is the payload of one host-tool call event. Refusal is the refusal's
// code only, never its sentence (which may quote guest text); Tool is the name as the guest
// sent it, at most 120 characters.
type HostToolCalledEvent struct {
	Schema  string             `json:"schema"`
	ID      string             `json:"id"`
	Time    time.Time          `json:"time"`
	Engine  string             `json:"engine"`
	Backend string             `json:"backend"`
	Key     egresslog.EventKey `json:"key"`
	Kind    string             `json:"kind"`
	RunDir  string             `json:"runDir"`
	Tool    string             `json:"tool"`
	Call    int                `json:"call"`
	Refusal string             `json:"refusal,omitempty"`
	Bytes   int                `json:"bytes"`
	Seconds float64            `json:"seconds"`
}

// HostToolSubject is the subject of a call event of scope and kind under prefix.
func HostToolSubject(prefix, scope, kind string) string {
	return fmt.Sprintf(SubjectHostToolCalledT, prefix, egresslog.Token(scope), egresslog.Token(kind))
}

// hostToolReporter logs, and publishes when [WithHostToolEvents] is set, each call of a run.
func (s *Service) hostToolReporter(h *handle, l hosttools.Layout) func(hosttools.Called) {
	return func(c hosttools.Called) {
		s.log.Debug("host tool called", zap.String("key", h.key.String()), zap.String("tool", c.Tool),
			zap.Int("call", c.Number), zap.String("refusal", c.Code), zap.String("run", l.Dir))
		if s.o.hostToolEvents == "" {
			return
		}
		ev := HostToolCalledEvent{Schema: SchemaHostToolCalled, ID: nuid.Next(), Time: time.Now().UTC(), Engine: s.id,
			Backend: backendName(s), Key: egresslog.EventKey{Scope: h.key.Scope, ThreadID: h.key.ThreadID, AgentID: h.key.AgentID,
				CallID: h.key.CallID}, Kind: h.kind, RunDir: l.Dir, Tool: c.Tool, Call: c.Number, Refusal: c.Code,
			Bytes: c.Bytes, Seconds: c.Seconds}
		b, err := json.Marshal(ev)
		if err == nil {
			msg := &nats.Msg{Subject: HostToolSubject(s.o.hostToolEvents, h.key.Scope, h.kind), Data: b, Header: nats.Header{}}
			msg.Header.Set(egresslog.HeaderMsgID, ev.ID)
			msg.Header.Set(egresslog.HeaderEventType, TypeHostToolCalled)
			msg.Header.Set(egresslog.HeaderContentType, "application/json")
			err = s.nc.PublishMsg(msg)
		}
		if err != nil {
			s.log.Debug("publish a host-tool event", zap.Error(err))
		}
	}
}
