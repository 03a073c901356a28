package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/sandbox"
)

// DefaultProcessReadBytes is what one read returns when the caller sets no bound.
const DefaultProcessReadBytes = sandbox.MiB

// ReadProcessOutput reads ref's stored output from sequence from: at most opts.MaxBytes
// (default [DefaultProcessReadBytes]), waiting up to opts.Wait for a record when nothing is
// stored at from yet. Output the stream no longer holds (its retention purged it, or a cut
// record says it was lost before it was stored) comes as the read's Cut, before the chunks
// after it; a read that meets a cut after some chunks stops there, so the next read starts
// with it. Exit is set once the read reached the end of the output and the exit is stored.
// A process of which nothing is stored is a [*sandbox.ProcessNotFoundError].
func (p *ProcessStreams) ReadProcessOutput(ctx context.Context, ref sandbox.ProcessRef, from int64, opts sandbox.ReadOptions) (sandbox.ProcessOutput, error) {
	s, err := p.ensure(ctx)
	if err != nil {
		return sandbox.ProcessOutput{}, err
	}
	subj := p.Subject(ref)
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultProcessReadBytes
	}
	deadline := time.Now().Add(opts.Wait)
	var sub *nats.Subscription
	defer func() {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}()
	for {
		out, err := p.readOnce(ctx, s, subj, from, maxBytes)
		if errors.As(err, new(*sandbox.ProcessNotFoundError)) {
			return out, err
		}
		if err != nil {
			p.forget(err)
			return sandbox.ProcessOutput{}, fmt.Errorf("events: read %s: %w", subj, err)
		}
		if len(out.Chunks) > 0 || out.Cut != nil || out.Exit != nil || opts.Wait <= 0 {
			return out, nil
		}
		if sub == nil {
			// Subscribed first, read again: a record stored between the read and the
			// subscription is then seen by one or the other.
			if sub, err = p.nc.SubscribeSync(subj); err != nil {
				return out, nil
			}
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			return out, nil
		}
		wctx, cancel := context.WithTimeout(ctx, left)
		_, err = sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return sandbox.ProcessOutput{}, ctx.Err()
			}
			return out, nil
		}
	}
}

// readOnce reads the records stored from sequence from on, as [ReadProcessOutput] does,
// without waiting.
func (p *ProcessStreams) readOnce(ctx context.Context, s jetstream.Stream, subj string, from, maxBytes int64) (sandbox.ProcessOutput, error) {
	out := sandbox.ProcessOutput{Next: from}
	cur, err := p.resume(ctx, s, subj, from)
	if err != nil {
		return out, err
	}
	if cur == nil {
		return out, &sandbox.ProcessNotFoundError{ID: subj[strings.LastIndexByte(subj, '.')+1:]}
	}
	r := &reading{out: &out, max: maxBytes}
	for {
		if r.take(decode(cur)) {
			p.remember(subj, out.Next, cur, out.Next >= decode(cur).end())
			return out, nil
		}
		next, err := s.GetMsg(ctx, cur.Sequence+1, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			p.remember(subj, out.Next, cur, true)
			return out, nil
		}
		if err != nil {
			return sandbox.ProcessOutput{}, err
		}
		cur = next
	}
}

// resume is the record a read from sequence from starts with: the cursor a read that ended
// there left, when its record is still the one, else the result of a search.
func (p *ProcessStreams) resume(ctx context.Context, s jetstream.Stream, subj string, from int64) (*jetstream.RawStreamMsg, error) {
	p.mu.Lock()
	at, ok := p.cursors[cursorKey{subj, from}]
	p.mu.Unlock()
	if ok {
		m, err := s.GetMsg(ctx, at, jetstream.WithGetMsgSubject(subj))
		if err == nil {
			if r := decode(m); r.seq <= from && (r.kind != RecordOutput || r.end() > from || r.seq == from) {
				return m, nil
			}
		}
	}
	return p.locate(ctx, s, subj, from)
}

// remember keeps where a read that returned next may go on: at cur, or after it when it was
// read to its end.
func (p *ProcessStreams) remember(subj string, next int64, cur *jetstream.RawStreamMsg, consumed bool) {
	at := cur.Sequence
	if consumed {
		at++
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cursors) >= maxCursors {
		clear(p.cursors)
	}
	p.cursors[cursorKey{subj, next}] = at
}

// reading is one read's output as its records arrive.
type reading struct {
	out *sandbox.ProcessOutput
	n   int64
	max int64
}

// take adds one record to the read and reports whether the read is complete. Output before
// the read's next sequence is trimmed (a record stored twice, or one the reader asked into),
// a hole before a record is a cut.
func (r *reading) take(rec storedRecord) bool {
	out := r.out
	switch rec.kind {
	case RecordOutput:
		end := rec.end()
		if end <= out.Next {
			return false
		}
		if rec.seq > out.Next && r.gap(rec.seq, "retention") {
			return true
		}
		data := rec.data[out.Next-rec.seq:]
		if room := r.max - r.n; int64(len(data)) > room {
			data = data[:room]
		}
		out.Chunks = append(out.Chunks, sandbox.OutputChunk{Seq: out.Next, Stream: rec.stream, Data: data})
		out.Next += int64(len(data))
		r.n += int64(len(data))
		return r.n >= r.max
	case RecordCut:
		if rec.to <= out.Next {
			return false
		}
		return r.gap(rec.to, rec.reason)
	case RecordExit:
		if rec.seq > out.Next && r.gap(rec.seq, "retention") {
			return true
		}
		if rec.proc != nil && rec.seq == out.Next {
			exit := rec.proc.process().Exit
			out.Exit = exit
		}
		return true
	}
	return false
}

// gap records that the output up to to is not held, unless the read already has something:
// it then stops before the gap (true), and the next read starts with it.
func (r *reading) gap(to int64, reason string) bool {
	if r.n > 0 || r.out.Cut != nil {
		return true
	}
	r.out.Cut = &sandbox.OutputCut{From: r.out.Next, To: to, Reason: reason}
	r.out.Next = to
	return false
}

// locate is the record of subj holding sequence from (the last whose sequence is at most
// from), or its first when every record is past from; nil when subj holds none. It searches
// the stream's sequences between the subject's first and last record, a few gets for any
// length of output.
func (p *ProcessStreams) locate(ctx context.Context, s jetstream.Stream, subj string, from int64) (*jetstream.RawStreamMsg, error) {
	first, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if headerSeq(first.Header) >= from {
		return first, nil
	}
	last, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return nil, err
	}
	if headerSeq(last.Header) <= from {
		return last, nil
	}
	lo, hi := first, last.Sequence // lo's sequence is at most from, hi's record is past it
	for lo.Sequence+1 < hi {
		mid := lo.Sequence + (hi-lo.Sequence)/2
		m, err := s.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(subj))
		if err != nil {
			return nil, err
		}
		switch {
		case m.Sequence >= hi:
			hi = mid // nothing of subj in [mid, hi)
		case headerSeq(m.Header) > from:
			hi = m.Sequence
		default:
			lo = m
		}
	}
	return lo, nil
}
