package service

import (
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/hosttools"
)

// HostToolSink receives one event per host-tool call of a run_program ([WithHostToolEvents]);
// events.HostToolSink, which events.Events.HostTools hands out, publishes them. It must not
// block: the call's reply waits for it.
type HostToolSink interface {
	HostToolCalled(ev events.HostToolCalledEvent)
}

// hostToolReporter logs, and hands to the sink when [WithHostToolEvents] is set, each call of
// a run.
func (s *Service) hostToolReporter(h *handle, l hosttools.Layout) func(hosttools.Called) {
	return func(c hosttools.Called) {
		s.log.Debug("host tool called", zap.String("key", h.key.String()), zap.String("tool", c.Tool),
			zap.Int("call", c.Number), zap.String("refusal", c.Code), zap.String("run", l.Dir))
		if s.o.hostToolEvents == nil {
			return
		}
		s.o.hostToolEvents.HostToolCalled(events.HostToolCalledEvent{Engine: s.id, Backend: backendName(s),
			Key:  events.EventKey{Scope: h.key.Scope, ThreadID: h.key.ThreadID, AgentID: h.key.AgentID, CallID: h.key.CallID},
			Kind: h.kind, RunDir: l.Dir, Tool: c.Tool, Call: c.Number, Refusal: c.Code, Bytes: c.Bytes, Seconds: c.Seconds})
	}
}
