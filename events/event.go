package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// This file is the wire side of the events (egress-and-reap.md §3.7): subjects, the event
// payloads and the headers they travel with. docs/events.md describes the same thing for
// subscribers in any language; change both together.

// DefaultSubjectPrefix is the subject prefix when none is configured.
const DefaultSubjectPrefix = "maf.sandbox.docker"

// Subjects. Each has a wildcard form to subscribe to and a T template to format with the
// prefix (and, for egress, the scope and kind tokens, see [Token]).
const (
	// SubjectEgressObserved carries one [EgressObservedEvent] per proxy window:
	// <prefix>.egress.observed.<Token(scope)>.<Token(kind)>. Stream MAF_SANDBOX_EGRESS.
	SubjectEgressObserved  = DefaultSubjectPrefix + ".egress.observed.*.*"
	SubjectEgressObservedT = "%s.egress.observed.%s.%s"
	// SubjectReapCompleted carries one [ReapCompletedEvent] per sweep: <prefix>.reap.completed.
	// Stream MAF_SANDBOX_OPS.
	SubjectReapCompleted  = DefaultSubjectPrefix + ".reap.completed"
	SubjectReapCompletedT = "%s.reap.completed"
)

// Payload schemas (the "schema" field) and event types (the Maf-Event-Type header). Version 2
// spells every field in snake_case, as the NATS API does (docs/events.md, "Schema versions").
const (
	SchemaEgressObserved = "maf.sandbox.egress.observed/v2"
	SchemaReapCompleted  = "maf.sandbox.reap.completed/v2"
	TypeEgressObserved   = "egress.observed.v2"
	TypeReapCompleted    = "reap.completed.v2"
)

// Headers every event carries.
const (
	HeaderMsgID       = "Nats-Msg-Id" // the event ID; JetStream drops a repeat inside its duplicate window
	HeaderEventType   = "Maf-Event-Type"
	HeaderContentType = "Content-Type" // always application/json
)

// BackendDocker is the "backend" of every event this engine publishes.
const BackendDocker = "docker"

var plainToken = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// Token maps a raw value (a scope, a kind) to one NATS subject token: s itself when it matches
// ^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$ and does not start with "h_", otherwise "h_" and the first 32
// hex digits of SHA-256(s). Subscribers use it to build filters:
// Token("tenant-1") is "tenant-1", so maf.sandbox.docker.egress.observed.tenant-1.> selects
// that scope.
func Token(s string) string {
	if plainToken.MatchString(s) && !strings.HasPrefix(s, "h_") {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h_" + hex.EncodeToString(sum[:])[:32]
}

// CheckSubjectPrefix refuses, with [ErrInvalidEvent], a prefix that is not one or more plain,
// dot-separated subject tokens: the check [EgressMessage] and [ReapMessage] make, exported so
// that a publisher binding streams to a prefix refuses the same ones.
func CheckSubjectPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("%w: empty subject prefix", ErrInvalidEvent)
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("%w: subject prefix %q", ErrInvalidEvent, prefix)
		}
	}
	return nil
}

// EgressSubject is the subject of a window of key's scope and kind under prefix.
func EgressSubject(prefix, scope, kind string) string {
	return fmt.Sprintf(SubjectEgressObservedT, prefix, Token(scope), Token(kind))
}

// ReapSubject is the subject of reap summaries under prefix.
func ReapSubject(prefix string) string { return fmt.Sprintf(SubjectReapCompletedT, prefix) }

// EventProxy names the proxy container a window came from.
type EventProxy struct {
	ContainerID string `json:"container_id"`
	Name        string `json:"name"`
}

// EventWindow bounds a window.
type EventWindow struct {
	Start  *time.Time `json:"start"` // null when unknown
	End    time.Time  `json:"end"`
	Closed bool       `json:"closed"`
}

// EventDecision is one decision of a window, in the order the proxy wrote it.
type EventDecision struct {
	Verdict string        `json:"verdict"` // ALLOW, DENY, DENY-NONGLOBAL, UNREACHABLE, WOULD-DENY
	Host    string        `json:"host"`    // guest-chosen on DENY: treat as untrusted text
	Port    int           `json:"port"`
	At      *time.Time    `json:"at,omitempty"`
	Request *EventRequest `json:"request,omitempty"` // only for a request an inspecting rule decided
	TLS     string        `json:"tls,omitempty"`     // only on a DENY refused at the workload's TLS handshake: why (egresslog.ValidTLSReason)
}

// EventRequest is what an inspecting rule decided about one request: absent from a tunnel's
// decision, which keeps the shape it always had. Method and path are guest-chosen text.
type EventRequest struct {
	Method   string `json:"method"`
	Path     string `json:"path"`      // without the query, at most egresslog.MaxLoggedPath bytes
	Status   int    `json:"status"`    // the status the workload was answered; 0 when the exchange was cut first
	BytesOut int64  `json:"bytes_out"` // request bytes sent upstream, head and body; 0 when refused
	BytesIn  int64  `json:"bytes_in"`  // response bytes relayed to the workload, head and body
	Rule     string `json:"rule"`      // the host pattern of the rule that decided; "" from a proxy older than the field
}

// EventCounts counts a window's decisions by verdict.
type EventCounts struct {
	Allow         int `json:"allow"`
	Deny          int `json:"deny"`
	DenyNonGlobal int `json:"deny_non_global"`
	Unreachable   int `json:"unreachable"`
	WouldDeny     int `json:"would_deny"` // requests a shadow rule let pass
}

// EgressObservedEvent is the JSON payload of SubjectEgressObserved (schema
// [SchemaEgressObserved]).
type EgressObservedEvent struct {
	Schema       string          `json:"schema"`
	EventID      string          `json:"event_id"` // "egw_" + the proxy's 64-hex container ID
	Backend      string          `json:"backend"`
	EngineID     string          `json:"engine_id"`
	Key          messages.APIKey `json:"key"`
	Attribution  string          `json:"attribution"` // label, legacy-selectors or caller-key
	Kind         string          `json:"kind"`
	Proxy        EventProxy      `json:"proxy"`
	PrivateCIDRs []string        `json:"private_cidrs"`
	Window       EventWindow     `json:"window"`
	Decisions    []EventDecision `json:"decisions"`
	Counts       EventCounts     `json:"counts"`
	Truncated    bool            `json:"truncated"`
	Unreadable   *string         `json:"unreadable"`
	Trigger      string          `json:"trigger"`
	Removal      string          `json:"removal"` // removed or absent
	DrainSeconds float64         `json:"drain_seconds"`
	PublishedAt  time.Time       `json:"published_at"`
}

var proxyID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// EgressEventID is the stable ID of the window of the proxy container proxyID: one proxy
// container is one window, so retries and overlapping drainers — any engine, the reaper —
// produce the same ID. It holds nothing of the drain (no time, no drainer, nothing random):
// that is what lets the stream's duplicate window drop a second drain of the same proxy.
func EgressEventID(proxyID string) string { return "egw_" + proxyID }

// EgressEvent builds the event of the window w for the engine engineID, stamped publishedAt. It refuses
// with [ErrInvalidEvent] a window that must not be published: a proxy ID that is not 64 hex,
// an unattributed key, a removal that is neither removed nor absent, or an empty window
// (no decision and nothing unreadable: §3.1 emits nothing for it).
func EgressEvent(w sandbox.EgressWindow, engineID string, publishedAt time.Time) (EgressObservedEvent, error) {
	switch {
	case !proxyID.MatchString(w.ProxyID):
		return EgressObservedEvent{}, fmt.Errorf("%w: proxy ID %q is not 64 hex", ErrInvalidEvent, w.ProxyID)
	case !egresslog.Attribution(w.Attribution).Attributed():
		return EgressObservedEvent{}, fmt.Errorf("%w: window of %s is not attributed (%s)", ErrInvalidEvent, w.ProxyID, w.Attribution)
	case w.Removal != sandbox.RemovalRemoved && w.Removal != sandbox.RemovalAbsent:
		return EgressObservedEvent{}, fmt.Errorf("%w: removal %q is neither removed nor absent", ErrInvalidEvent, w.Removal)
	case len(w.Decisions) == 0 && w.Unreadable == "":
		return EgressObservedEvent{}, fmt.Errorf("%w: empty window", ErrInvalidEvent)
	}
	ev := EgressObservedEvent{
		Schema: SchemaEgressObserved, EventID: EgressEventID(w.ProxyID), Backend: BackendDocker, EngineID: engineID,
		Key: *messages.KeyToWire(w.Key), Attribution: w.Attribution, Kind: w.Kind,
		Proxy:        EventProxy{ContainerID: w.ProxyID, Name: w.ProxyName},
		PrivateCIDRs: []string{},
		Window:       EventWindow{End: w.End.UTC(), Closed: w.Closed},
		Decisions:    make([]EventDecision, 0, len(w.Decisions)),
		Truncated:    w.Truncated, Trigger: w.Trigger, Removal: w.Removal, DrainSeconds: w.DrainSeconds,
		PublishedAt: publishedAt.UTC(),
	}
	if w.PrivateCIDRs != "" {
		ev.PrivateCIDRs = strings.Split(w.PrivateCIDRs, ",")
	}
	if !w.Start.IsZero() {
		s := w.Start.UTC()
		ev.Window.Start = &s
	}
	if w.Unreadable != "" {
		u := w.Unreadable
		ev.Unreadable = &u
	}
	for _, d := range w.Decisions {
		ev.Decisions = append(ev.Decisions, eventDecision(d))
		ev.Counts.add(d.Decision)
	}
	return ev, nil
}

func eventDecision(d sandbox.EgressDecision) EventDecision {
	ed := EventDecision{Verdict: string(d.Decision), Host: d.Host, Port: d.Port, TLS: d.TLS}
	if d.Method != "" {
		ed.Request = &EventRequest{Method: d.Method, Path: d.Path, Status: d.Status, BytesOut: d.BytesOut, BytesIn: d.BytesIn, Rule: d.Rule}
	}
	if !d.At.IsZero() {
		at := d.At.UTC()
		ed.At = &at
	}
	return ed
}

func (c *EventCounts) add(d sandbox.EgressDecisionCode) {
	switch d {
	case sandbox.DecisionAllow:
		c.Allow++
	case sandbox.DecisionDeny:
		c.Deny++
	case sandbox.DecisionDenyNonGlobal:
		c.DenyNonGlobal++
	case sandbox.DecisionUnreachable:
		c.Unreachable++
	case sandbox.DecisionWouldDeny:
		c.WouldDeny++
	}
}

// ReapCompletedEvent is the JSON payload of SubjectReapCompleted (schema
// [SchemaReapCompleted]): the sweep's summary in the one spelling of a sweep's result
// (messages.APIReapResult, as the reap call answers it), without its resources.
type ReapCompletedEvent struct {
	Schema   string `json:"schema"`
	EventID  string `json:"event_id"` // "reap_" + the run ID
	Backend  string `json:"backend"`
	EngineID string `json:"engine_id"`
	messages.APIReapResult
	PublishedAt time.Time `json:"published_at"`
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

// ReapEvent builds the event of the sweep res under runID, the sweep's own random ID (a
// retry of one sweep's publication keeps it). [ErrInvalidEvent] for a run ID that is not 8–64
// of [A-Za-z0-9_-], a non-positive age or a dry run.
func ReapEvent(res sandbox.ReapResult, runID, engineID string, publishedAt time.Time) (ReapCompletedEvent, error) {
	switch {
	case !runIDPattern.MatchString(runID):
		return ReapCompletedEvent{}, fmt.Errorf("%w: run ID %q", ErrInvalidEvent, runID)
	case res.OlderThan <= 0:
		return ReapCompletedEvent{}, fmt.Errorf("%w: age %s", ErrInvalidEvent, res.OlderThan)
	case res.DryRun:
		return ReapCompletedEvent{}, fmt.Errorf("%w: a dry run removed nothing", ErrInvalidEvent)
	}
	res.Resources = nil // the summary: a sweep's every resource is its caller's to read
	return ReapCompletedEvent{Schema: SchemaReapCompleted, EventID: "reap_" + runID, Backend: BackendDocker, EngineID: engineID,
		APIReapResult: messages.ReapToWire(res), PublishedAt: publishedAt.UTC()}, nil
}

// Message is one event ready to publish: its subject, its ID (sent as Nats-Msg-Id), its type
// (sent as Maf-Event-Type) and its JSON payload.
type Message struct {
	Subject string
	ID      string
	Type    string
	Data    []byte
}

// EgressMessage encodes ev for prefix.
func EgressMessage(prefix string, ev EgressObservedEvent) (Message, error) {
	if err := CheckSubjectPrefix(prefix); err != nil {
		return Message{}, err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return Message{}, fmt.Errorf("encode egress event: %w", err)
	}
	return Message{Subject: EgressSubject(prefix, ev.Key.Scope, ev.Kind), ID: ev.EventID, Type: TypeEgressObserved, Data: data}, nil
}

// ReapMessage encodes ev for prefix.
func ReapMessage(prefix string, ev ReapCompletedEvent) (Message, error) {
	if err := CheckSubjectPrefix(prefix); err != nil {
		return Message{}, err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return Message{}, fmt.Errorf("encode reap event: %w", err)
	}
	return Message{Subject: ReapSubject(prefix), ID: ev.EventID, Type: TypeReapCompleted, Data: data}, nil
}
