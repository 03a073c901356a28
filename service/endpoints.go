package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
)

// Why the engine answers the nats micro protocol itself instead of through micro.AddService:
// micro counts a request, its errors and its processing time around its handler, and it runs
// each endpoint's handler on the subscription's one goroutine. An engine call can take
// minutes, so the handler must return at once and the reply goes out later from another
// goroutine; micro then counts a few microseconds and never an error. The engine keeps
// micro's wire format ($SRV.PING|INFO|STATS, [micro.Info], [micro.Stats], the
// Nats-Service-Error headers), subscribes its endpoints itself with each request handled on
// its own goroutine, and counts every call when its reply is sent: requests, errors (every
// reply with an error object), the engine's own failures among them (the endpoint's data,
// [messages.EndpointStatsData]: a caller's bad request is no failure of the engine's), and
// the time from the request's arrival to its reply.

// endpointSet is every subject the engine answers: the endpoints, alive last, and the $SRV
// subscriptions (control).
type endpointSet struct {
	all     []*endpoint
	control []*nats.Subscription
	alive   *endpoint
	subs    int // the connection's subscriptions before the service added its own, alive included
}

// endpoint is one subject the engine answers: an operation's, or the alive subject. Its
// counters are what $SRV.STATS reports.
type endpoint struct {
	name    string
	subject string
	queue   string // "" when the queue group is disabled
	meta    map[string]string
	sub     *nats.Subscription

	mu         sync.Mutex
	requests   int
	errors     int
	failures   int // errors of the engine's own (engineFailureCodes)
	lastError  string
	processing time.Duration
}

// record counts one request answered after elapsed, failed with errText when it is not "",
// and by the engine's own fault when code is one of [engineFailureCodes].
func (e *endpoint) record(elapsed time.Duration, errText, code string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests++
	e.processing += elapsed
	if errText != "" {
		e.errors++
		e.lastError = errText
	}
	if engineFailureCodes[code] {
		e.failures++
	}
}

func (e *endpoint) info() micro.EndpointInfo {
	return micro.EndpointInfo{Name: e.name, Subject: e.subject, QueueGroup: e.queue, Metadata: maps.Clone(e.meta)}
}

func (e *endpoint) stats() *micro.EndpointStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := &micro.EndpointStats{Name: e.name, Subject: e.subject, QueueGroup: e.queue,
		NumRequests: e.requests, NumErrors: e.errors, LastError: e.lastError, ProcessingTime: e.processing}
	st.Data, _ = json.Marshal(messages.EndpointStatsData{EngineFailures: e.failures})
	if e.requests > 0 {
		st.AverageProcessingTime = e.processing / time.Duration(e.requests)
	}
	return st
}

// endpointMeta is an endpoint's metadata in $SRV.INFO.
func endpointMeta(description, reqType, respType string) map[string]string {
	return map[string]string{"description": description, "request_type": reqType, "response_type": respType}
}

// subscribe adds e's subscription, in its queue group when it has one, handing each message
// to h.
func (s *Service) subscribe(e *endpoint, h nats.MsgHandler) error {
	var err error
	if e.queue != "" {
		e.sub, err = s.nc.QueueSubscribe(e.subject, e.queue, h)
	} else {
		e.sub, err = s.nc.Subscribe(e.subject, h)
	}
	if err != nil {
		return fmt.Errorf("subscribe %s to %s: %w", e.name, e.subject, err)
	}
	return nil
}

// identity is what every $SRV reply says about this engine.
func (s *Service) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: messages.ServiceName, ID: s.id, Version: s.o.version,
		Metadata: map[string]string{"engine": s.id, "prefix": s.o.prefix}}
}

// serviceDescription is the micro service's description in $SRV.INFO.
const serviceDescription = "maf-sandbox engine: sandboxes for AI agents' tool calls in Docker"

// discover subscribes the $SRV.PING, $SRV.INFO and $SRV.STATS subjects: for every service,
// for [messages.ServiceName], and for this engine (its ID is the service ID).
func (s *Service) discover() error {
	verbs := []struct {
		verb   micro.Verb
		answer func() any
	}{
		{micro.PingVerb, func() any { return micro.Ping{ServiceIdentity: s.identity(), Type: micro.PingResponseType} }},
		{micro.InfoVerb, func() any {
			info := micro.Info{ServiceIdentity: s.identity(), Type: micro.InfoResponseType, Description: serviceDescription,
				Endpoints: make([]micro.EndpointInfo, 0, len(s.eps.all))}
			for _, e := range s.eps.all {
				info.Endpoints = append(info.Endpoints, e.info())
			}
			return info
		}},
		{micro.StatsVerb, func() any {
			st := micro.Stats{ServiceIdentity: s.identity(), Type: micro.StatsResponseType, Started: s.started,
				Endpoints: make([]*micro.EndpointStats, 0, len(s.eps.all))}
			for _, e := range s.eps.all {
				st.Endpoints = append(st.Endpoints, e.stats())
			}
			return st
		}},
	}
	for _, v := range verbs {
		for _, scope := range [][2]string{{"", ""}, {messages.ServiceName, ""}, {messages.ServiceName, s.id}} {
			subject, err := micro.ControlSubject(v.verb, scope[0], scope[1])
			if err != nil {
				return fmt.Errorf("control subject of %s: %w", v.verb, err)
			}
			answer := v.answer
			sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) {
				b, err := json.Marshal(answer())
				if err == nil {
					err = m.Respond(b)
				}
				if err != nil && !errors.Is(err, nats.ErrMsgNoReply) {
					s.log.Debug("answer "+subject, zap.Error(err))
				}
			})
			if err != nil {
				return fmt.Errorf("subscribe to %s: %w", subject, err)
			}
			s.eps.control = append(s.eps.control, sub)
		}
	}
	return nil
}
