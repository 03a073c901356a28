package main

import (
	"encoding/json"
	"strconv"

	"github.com/mafsandbox/engine/internal/execwire"
)

// calls answers the connection's Calls in turn, first among them p's, until it closes. A
// wait holds the connection until its process ends.
func (s *supervisor) calls(c *conn, p []byte) {
	for {
		var call execwire.CallRequest
		rep := failed(execwire.CodeInvalid, "malformed call")
		if json.Unmarshal(p, &call) == nil {
			rep = s.procs.call(&call)
		}
		b, err := json.Marshal(rep)
		if err != nil || c.send(execwire.Reply, b) != nil {
			return
		}
		typ, next, err := execwire.Read(c.c, execwire.MaxPayload)
		if err != nil || typ != execwire.Call {
			return
		}
		p = next
	}
}

// attachRead bounds one read of a buffer for an attached engine.
const attachRead = 256 << 10

// attach streams one process's output from the sequence asked: a Gap for what the buffer no
// longer holds, Chunks, Caught each time everything written so far was sent, and End once the
// process has ended and everything was sent. Release frames from the engine drop what it
// stored. The stream reads the buffer, never the process's pipes: a slow engine holds only
// itself up, and the process's output is read on (and dropped beyond the bound) meanwhile.
func (s *supervisor) attach(c *conn, p []byte) {
	var req execwire.AttachRequest
	if json.Unmarshal(p, &req) != nil {
		return
	}
	m, rep := s.procs.get(req.ID)
	if m == nil {
		b, _ := json.Marshal(rep)
		_ = c.send(execwire.Reply, b)
		return
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		following := false
		defer func() {
			if following {
				m.followers.Add(-1)
			}
		}()
		for {
			typ, p, err := execwire.Read(c.c, 64)
			if err != nil {
				return
			}
			if seqs, err := execwire.DecodeSeqs(p, 1); typ == execwire.Release && err == nil {
				if !following { // an engine that stores the output: it holds the process back rather than lose it
					following = true
					m.followers.Add(1)
				}
				s.procs.release(m, seqs[0])
			}
		}
	}()
	s.stream(c, m, req.From, gone)
}

func (s *supervisor) stream(c *conn, m *managed, from int64, gone <-chan struct{}) {
	caught := false
	for {
		changed := m.buf.Changed()
		chunks, gap, next, err := m.buf.Read(from, attachRead)
		if err != nil {
			b, _ := json.Marshal(failed(execwire.CodeInvalid, err.Error()+" (asked from "+strconv.FormatInt(from, 10)+")"))
			_ = c.send(execwire.Reply, b)
			return
		}
		if gap != nil && c.send(execwire.Gap, execwire.EncodeSeqs(gap.From, gap.To)) != nil {
			return
		}
		for _, ch := range chunks {
			if c.send(execwire.Chunk, execwire.EncodeChunk(ch.Stream, ch.Seq, ch.Data)) != nil {
				return
			}
		}
		from = next
		if len(chunks) > 0 || gap != nil {
			caught = false
			continue
		}
		if st := m.buf.State(); st.Closed && from == st.End {
			b, _ := json.Marshal(s.procs.record(m))
			_ = c.send(execwire.End, b)
			return
		}
		if !caught {
			if c.send(execwire.Caught, execwire.EncodeSeqs(from)) != nil {
				return
			}
			caught = true
		}
		select {
		case <-changed:
		case <-gone:
			return
		}
	}
}
