package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
)

// Host-tool call events: one per call of a run_program, published on core NATS next to the
// egress events (same prefix, headers and key shape; docs/events.md).
const (
	// SubjectHostToolCalledT is <event prefix>.host_tools.called.<Token(scope)>.<Token(kind)>.
	SubjectHostToolCalledT = "%s.host_tools.called.%s.%s"
	SchemaHostToolCalled   = "maf.sandbox.host_tools.called/v2"
	TypeHostToolCalled     = "host_tools.called.v2"
)

// HostToolCalledEvent is the payload of one host-tool call event. Refusal is the refusal's
// code only, never its sentence (which may quote guest text); Tool is the name as the guest
// sent it, at most 120 characters. Engine is the Docker daemon's ID, Service the engine
// process's on the API, as in the audit events.
type HostToolCalledEvent struct {
	Schema  string          `json:"schema"`
	ID      string          `json:"id"`
	Time    time.Time       `json:"time"`
	Engine  string          `json:"engine"`
	Service string          `json:"service,omitempty"`
	Backend string          `json:"backend"`
	Key     messages.APIKey `json:"key"`
	Kind    string          `json:"kind"`
	RunDir  string          `json:"run_dir"`
	Tool    string          `json:"tool"`
	Call    int             `json:"call"`
	Refusal string          `json:"refusal,omitempty"`
	Bytes   int             `json:"bytes"`
	Seconds float64         `json:"seconds"`
}

// HostToolSubject is the subject of a call event of scope and kind under prefix.
func HostToolSubject(prefix, scope, kind string) string {
	return fmt.Sprintf(SubjectHostToolCalledT, prefix, Token(scope), Token(kind))
}

// HostToolSink publishes host-tool call events on core NATS, at best effort: a call never
// waits for its event, and one that cannot be sent is logged at Debug.
type HostToolSink struct {
	nc     *nats.Conn
	prefix string
	log    *zap.Logger
}

// HostToolCalled publishes ev, its schema, ID and time filled in.
func (s HostToolSink) HostToolCalled(ev HostToolCalledEvent) {
	ev.Schema, ev.ID, ev.Time = SchemaHostToolCalled, nuid.Next(), time.Now().UTC()
	b, err := json.Marshal(ev)
	if err == nil {
		err = s.nc.PublishMsg(natsMsg(Message{Subject: HostToolSubject(s.prefix, ev.Key.Scope, ev.Kind), ID: ev.ID,
			Type: TypeHostToolCalled, Data: b}))
	}
	if err != nil {
		s.log.Debug("publish a host-tool event", zap.Error(err))
	}
}
