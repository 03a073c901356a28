package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/internal/procbuf"
	"github.com/mafsandbox/engine/sandbox"
)

// The engine's side of the supervisor's processes (execwire, process.go): each call is a
// connection of its own through the proven root, as a command's is, so a call never waits
// behind another, and a connection that breaks takes only its own call with it.

// procDial connects to route's supervisor and reads its greeting. The connection's deadline
// is ctx's end. A failure here sent nothing.
func procDial(ctx context.Context, route *channelRoute) (*net.UnixConn, func() bool, error) {
	c, err := dialSupervisor(ctx, route)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrExecChannelUnproven, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	_ = c.SetReadDeadline(time.Now().Add(execHelloBudget))
	typ, p, err := execwire.Read(c, len(execwire.Version))
	if err != nil || typ != execwire.Hello || string(p) != execwire.Version {
		stop()
		c.Close()
		return nil, nil, fmt.Errorf("%w: no %s greeting (%q, %v)", ErrExecChannelUnproven, execwire.Version, p, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, stop, nil
}

// channelCall sends one call and reads its reply. Before the call is written every failure is
// [ErrExecChannelUnproven]; after it, the context's error or an [*ExecChannelError] (the call
// may have been carried out).
func channelCall(ctx context.Context, container string, route *channelRoute, req execwire.CallRequest) (execwire.CallReply, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return execwire.CallReply{}, fmt.Errorf("encode the process call: %w", err)
	}
	if len(b) > execwire.MaxPayload {
		return execwire.CallReply{}, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("the process call is %d bytes encoded, over the limit of %d", len(b), execwire.MaxPayload)}
	}
	c, stop, err := procDial(ctx, route)
	if err != nil {
		return execwire.CallReply{}, err
	}
	defer c.Close()
	defer stop()
	if err := execwire.Write(c, execwire.Call, b); err != nil {
		return execwire.CallReply{}, afterSend(ctx, container, err)
	}
	typ, p, err := execwire.Read(c, execwire.MaxPayload)
	if err != nil {
		return execwire.CallReply{}, afterSend(ctx, container, err)
	}
	var rep execwire.CallReply
	if typ != execwire.Reply || json.Unmarshal(p, &rep) != nil {
		return execwire.CallReply{}, &ExecChannelError{Container: container, Err: fmt.Errorf("unexpected frame %q to a call", typ)}
	}
	return rep, nil
}

// afterSend is the error of a connection that failed once a call went out.
func afterSend(ctx context.Context, container string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("process call in %s: %w", container, ctx.Err())
	}
	return &ExecChannelError{Container: container, Err: err}
}

// attachStream is one process's output as its supervisor streams it.
type attachStream struct {
	c    *net.UnixConn
	stop func() bool
}

// channelAttach asks route's supervisor for id's output from sequence from on.
func channelAttach(ctx context.Context, route *channelRoute, id string, from int64) (*attachStream, error) {
	b, _ := json.Marshal(execwire.AttachRequest{ID: id, From: from})
	c, stop, err := procDial(ctx, route)
	if err != nil {
		return nil, err
	}
	if err := execwire.Write(c, execwire.Attach, b); err != nil {
		stop()
		c.Close()
		return nil, err
	}
	return &attachStream{c: c, stop: stop}, nil
}

// next reads the next frame, waiting at most until deadline (zero: the context's end only).
func (s *attachStream) next(deadline time.Time) (byte, []byte, error) {
	_ = s.c.SetReadDeadline(deadline)
	return execwire.Read(s.c, execwire.MaxPayload)
}

func (s *attachStream) close() {
	s.stop()
	s.c.Close()
}

// streamName is a chunk's stream as the protocol names it.
func streamName(s byte) string {
	switch s {
	case procbuf.Stderr:
		return sandbox.StreamStderr
	case procbuf.PTY:
		return sandbox.StreamTerminal
	}
	return sandbox.StreamStdout
}

// readChannel is one read of id's output from its supervisor's buffer: from seq on, at most
// maxBytes, waiting up to opts.Wait when nothing is there yet.
func readChannel(ctx context.Context, container string, route *channelRoute, id string, from, maxBytes int64, wait time.Duration) (sandbox.ProcessOutput, error) {
	s, err := channelAttach(ctx, route, id, from)
	if err != nil {
		return sandbox.ProcessOutput{}, err
	}
	defer s.close()
	g := &gathering{out: sandbox.ProcessOutput{Next: from}, max: maxBytes}
	var deadline time.Time // set once the supervisor said it sent all there is
	for {
		typ, p, err := s.next(deadline)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
				return g.out, nil // waited as long as asked
			}
			return sandbox.ProcessOutput{}, afterSend(ctx, container, err)
		}
		done, err := g.take(typ, p, id)
		if err != nil {
			return sandbox.ProcessOutput{}, err
		}
		if done {
			return g.out, nil
		}
		if typ == execwire.Caught {
			if len(g.out.Chunks) > 0 || g.out.Cut != nil || wait <= 0 {
				return g.out, nil
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(wait)
			}
		}
	}
}

// gathering is one read's output as its frames arrive.
type gathering struct {
	out sandbox.ProcessOutput
	n   int64 // bytes gathered
	max int64
}

// take adds one frame of an attach to the output and reports whether the read is complete.
func (g *gathering) take(typ byte, p []byte, id string) (bool, error) {
	out := &g.out
	switch typ {
	case execwire.Reply:
		var rep execwire.CallReply
		if json.Unmarshal(p, &rep) != nil || rep.Error == nil {
			return true, fmt.Errorf("%w: an attach answered %q", ErrExecChannelUnproven, p)
		}
		return true, callError(id, rep, ProcessLimits{})
	case execwire.Gap:
		seqs, err := execwire.DecodeSeqs(p, 2)
		if err != nil {
			return true, err
		}
		if len(out.Chunks) > 0 {
			return true, nil // the next read starts with the gap
		}
		out.Cut = &sandbox.OutputCut{From: seqs[0], To: seqs[1], Reason: "buffer"}
		out.Next = seqs[1]
	case execwire.Chunk:
		stream, seq, data, err := execwire.DecodeChunk(p)
		if err != nil {
			return true, err
		}
		if room := g.max - g.n; int64(len(data)) > room {
			data = data[:max(room, 0)]
		}
		if len(data) > 0 {
			out.Chunks = append(out.Chunks, sandbox.OutputChunk{Seq: seq, Stream: streamName(stream), Data: append([]byte(nil), data...)})
			out.Next = seq + int64(len(data))
			g.n += int64(len(data))
		}
		return g.n >= g.max, nil
	case execwire.End:
		var rec execwire.Process
		if err := json.Unmarshal(p, &rec); err != nil {
			return true, err
		}
		if rec.Exit != nil {
			exit := exitFromWire(*rec.Exit)
			out.Exit = &exit
		}
		return true, nil
	}
	return false, nil
}
