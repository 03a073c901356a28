package service

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/wire"
)

// connAge records when the engine's connection was last (re)established, for the alive reply:
// a client whose call has waited longer than that knows its request or reply may have gone
// with the engine's previous connection (a NATS node killed under it), instead of waiting out
// the call's timeout.
type connAge struct {
	at   atomic.Int64 // unix nanoseconds of the last (re)connect
	stop chan struct{}
	done chan struct{}
}

// watchConnection starts recording nc's reconnects until stopConnWatch.
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
			}
		}
	}()
}

func (s *Service) stopConnWatch() {
	if s.conn.stop != nil {
		close(s.conn.stop)
		<-s.conn.done
	}
}

// aliveReply is the body of an answer on the alive subject.
func (s *Service) aliveReply() []byte {
	ms := time.Since(time.Unix(0, s.conn.at.Load())).Milliseconds()
	b, _ := json.Marshal(wire.AliveReply{ConnectedMS: &ms}) // plain fields always encode
	return b
}
