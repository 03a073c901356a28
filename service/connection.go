package service

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
)

// connAge records when the engine's connection was last (re)established, for the alive
// replies: a client whose call has waited longer than that knows its request or reply may have
// gone with the engine's previous connection (a NATS node killed under it), instead of waiting
// out the call's timeout.
type connAge struct {
	at          atomic.Int64 // unix nanoseconds of the last (re)connect
	reconnected atomic.Bool
	pool        *nats.Subscription // the pool's alive subject (messages.SubjectAlive)
	stop        chan struct{}
	done        chan struct{}
}

// watchConnection starts recording nc's reconnects, and answering the pool's alive subject,
// until stopConnWatch.
func (s *Service) watchConnection() {
	s.conn.at.Store(time.Now().UnixNano())
	s.conn.stop, s.conn.done = make(chan struct{}), make(chan struct{})
	ch := s.nc.StatusChanged(nats.CONNECTED)
	go func() {
		defer close(s.conn.done)
		defer s.nc.RemoveStatusListener(ch)
		for {
			select {
			case <-s.conn.stop:
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				s.conn.at.Store(time.Now().UnixNano())
				s.conn.reconnected.Store(true)
			}
		}
	}()
	sub, err := s.nc.Subscribe(messages.Shared(messages.SubjectAliveT, s.o.prefix), func(m *nats.Msg) {
		if m.Reply != "" {
			_ = s.nc.Publish(m.Reply, s.aliveReply())
		}
	})
	if err != nil {
		// Only cold calls lose their drop detection: they wait out their timeout as before.
		s.log.Warn("subscribe the pool's alive subject", zap.Error(err))
		return
	}
	s.conn.pool = sub
	s.eps.subs++ // it stays through the drain, as the engine's own alive subject does
}

func (s *Service) stopConnWatch() {
	if s.conn.pool != nil {
		if err := s.conn.pool.Unsubscribe(); err != nil {
			s.log.Debug("unsubscribe the pool's alive subject", zap.Error(err))
		}
	}
	if s.conn.stop != nil {
		close(s.conn.stop)
		<-s.conn.done
	}
}

// aliveReply is the body of an answer on the alive subjects.
func (s *Service) aliveReply() []byte {
	ms := time.Since(time.Unix(0, s.conn.at.Load())).Milliseconds()
	r := messages.AliveReply{ConnectedMS: &ms, Engine: s.id}
	if s.conn.reconnected.Load() {
		r.ReconnectedMS = &ms
	}
	b, _ := json.Marshal(r) // plain fields always encode
	return b
}
