package service

import (
	"context"
	"sync"
	"time"

	"github.com/mafsandbox/engine/messages"
)

// HealthChecker is a backend that can tell whether what runs its sandboxes answers: the
// Docker backend (package actors) makes one round trip to its daemon. A health request asks
// it every time, bounded by [healthProbeTimeout]; a backend without it reports no daemon.
type HealthChecker interface {
	CheckHealth(ctx context.Context) error
}

// healthProbeTimeout bounds a health request's round trip to the daemon.
const healthProbeTimeout = 5 * time.Second

// Health status values.
const (
	HealthOK                = "ok"
	HealthDraining          = "draining"
	HealthEngineUnavailable = messages.CodeEngineUnavailable // the backend cannot reach its daemon
)

// engineFailureCodes are the failures health reports as the last engine error: the engine or
// its daemon failed, not the request.
var engineFailureCodes = map[string]bool{
	messages.CodeInternal:          true,
	messages.CodeEngineUnavailable: true,
	messages.CodeImageMissing:      true,
}

// lastFailure keeps the last engine failure a call met, for health.
type lastFailure struct {
	mu   sync.Mutex
	last *messages.APIHealthFailure
}

// note records err when it is an engine failure.
func (l *lastFailure) note(op string, err error) {
	if err == nil {
		return
	}
	apiErr := messages.EncodeError(err)
	if !engineFailureCodes[apiErr.Code] {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = &messages.APIHealthFailure{Op: op, At: time.Now().UTC(), Error: *apiErr}
}

func (l *lastFailure) get() *messages.APIHealthFailure {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return nil
	}
	v := *l.last
	return &v
}

// daemonHealth asks the backend's daemon, when the backend can be asked.
func (s *Service) daemonHealth(ctx context.Context) *messages.APIDaemonHealth {
	hc, ok := s.router.Backend().(HealthChecker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, healthProbeTimeout)
	defer cancel()
	if err := hc.CheckHealth(ctx); err != nil {
		apiErr := messages.EncodeError(err)
		s.daemonState(false, err) // report.go
		return &messages.APIDaemonHealth{Reachable: false, Error: apiErr}
	}
	s.daemonState(true, nil)
	return &messages.APIDaemonHealth{Reachable: true}
}

// eventsHealth is the events' outboxes as health reports them; nil without [WithEventStats].
func (s *Service) eventsHealth() *messages.APIEventsHealth {
	if s.o.eventStats == nil {
		return nil
	}
	st := s.o.eventStats.Stats()
	return &messages.APIEventsHealth{Pending: st.Pending, Blocked: st.Blocked, Dropped: st.Refused, Failed: st.Failed,
		StreamRefusals: st.StreamRefusals}
}
