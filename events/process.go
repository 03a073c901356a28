package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Processes' output on JetStream (docs/events.md, "Process output"): each process of a
// sandbox has one subject, <prefix>.process.<scopeTok>.<kindTok>.<instance>.<id>, under the
// sandbox's scope as every event is, so NATS permissions and tenancy exports apply to it as
// to the audit stream. On it, in order: a start record, the output as numbered messages (the
// sequence of a message is the offset of its first byte in everything the process wrote), a
// cut record where output was lost before it was stored, and an exit record. Every record's
// Nats-Msg-Id is a function of the process and its sequence, so a record published again
// (after a lost acknowledgement, or by an engine that followed the process again after
// another stopped) is stored once within the duplicate window; a reader also trims any
// output it already has by sequence, so nothing reaches it twice.

// StreamProcess holds processes' output: subjects <prefix>.process.>.
const StreamProcess = "MAF_SANDBOX_PROCESS"

// Default retention of a process's output: the last 64 MiB of each process, for 7 days.
const (
	DefaultProcessRetentionBytes = 64 * sandbox.MiB
	DefaultProcessRetentionAge   = 7 * 24 * time.Hour
)

// Headers of a process record.
const (
	HeaderProcessRecord = "Maf-Process-Record" // start, output, cut, exit
	HeaderProcessSeq    = "Maf-Process-Seq"    // output and cut: the sequence of the first byte; exit: the end
	HeaderProcessStream = "Maf-Process-Stream" // output: stdout, stderr or pty
)

// Kinds of process record.
const (
	RecordStart  = "start"
	RecordOutput = "output"
	RecordCut    = "cut"
	RecordExit   = "exit"
)

// ProcessStreams keeps processes' output on the process stream and reads it back. Build it
// with [NewProcessStreams]; it is actors.ProcessStore.
type ProcessStreams struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	prefix string
	bytes  int64
	age    time.Duration
	dupes  time.Duration
	log    *zap.Logger

	mu      sync.Mutex
	stream  jetstream.Stream // nil until ensured
	firsts  map[string]int64 // subject → the first sequence it is known to hold (retention)
	cursors map[cursorKey]uint64
}

// cursorKey is where a read ended: its subject and the sequence it returned as next. The
// cursor is the stream sequence to go on from, so a reader going on where it stopped finds
// its record without a search.
type cursorKey struct {
	subject string
	next    int64
}

// maxCursors bounds the cursors kept; past it they are forgotten (a read then searches).
const maxCursors = 4096

// ProcessOpt configures [NewProcessStreams].
type ProcessOpt func(*ProcessStreams) error

// WithProcessPrefix sets the subject prefix (default [DefaultSubjectPrefix]).
func WithProcessPrefix(prefix string) ProcessOpt {
	return func(p *ProcessStreams) error {
		if err := CheckSubjectPrefix(prefix); err != nil {
			return err
		}
		p.prefix = prefix
		return nil
	}
}

// WithProcessRetention sets the engine's retention of each process's output: its last bytes
// (default [DefaultProcessRetentionBytes]) for at most age (default
// [DefaultProcessRetentionAge], the stream's age). A process may ask for less of either.
func WithProcessRetention(bytes int64, age time.Duration) ProcessOpt {
	return func(p *ProcessStreams) error {
		if bytes < 0 || age < 0 || (age > 0 && age < time.Second) {
			return fmt.Errorf("%w: process retention %d bytes, %s (age at least 1s)", ErrInvalidEvent, bytes, age)
		}
		if bytes > 0 {
			p.bytes = bytes
		}
		if age > 0 {
			p.age = age
		}
		return nil
	}
}

// WithProcessDuplicateWindow sets the stream's duplicate window (default
// [DefaultDuplicateWindow]).
func WithProcessDuplicateWindow(d time.Duration) ProcessOpt {
	return func(p *ProcessStreams) error {
		if d <= 0 {
			return fmt.Errorf("%w: duplicate window %s", ErrInvalidEvent, d)
		}
		p.dupes = d
		return nil
	}
}

// WithProcessLogger logs to l (default: nothing).
func WithProcessLogger(l *zap.Logger) ProcessOpt {
	return func(p *ProcessStreams) error {
		if l != nil {
			p.log = l
		}
		return nil
	}
}

// NewProcessStreams keeps processes' output over nc, which the caller owns and closes. It
// makes no call to the server: the stream is created (or updated) on first use.
func NewProcessStreams(nc *nats.Conn, opts ...ProcessOpt) (*ProcessStreams, error) {
	if nc == nil {
		return nil, fmt.Errorf("new process streams: %w: nil connection", ErrInvalidEvent)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("new process streams: %w", err)
	}
	p := &ProcessStreams{nc: nc, js: js, prefix: DefaultSubjectPrefix, bytes: DefaultProcessRetentionBytes, age: DefaultProcessRetentionAge,
		dupes: DefaultDuplicateWindow, log: zap.NewNop(), firsts: map[string]int64{}, cursors: map[cursorKey]uint64{}}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(p); err != nil {
			return nil, fmt.Errorf("new process streams: %w", err)
		}
	}
	return p, nil
}

// StreamConfig is the process stream's configuration: file storage, the engine's age,
// per-message TTLs allowed (a process that asks for a shorter age gets it on its messages).
func (p *ProcessStreams) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: StreamProcess, Description: "maf-sandbox processes' output",
		Subjects: []string{p.prefix + ".process.>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		MaxAge: p.age, Duplicates: p.dupes, AllowMsgTTL: true, Discard: jetstream.DiscardOld,
	}
}

// Retention is the engine's retention of a process's output.
func (p *ProcessStreams) Retention() sandbox.OutputRetention {
	return sandbox.OutputRetention{Bytes: p.bytes, Age: p.age}
}

func (p *ProcessStreams) ensure(ctx context.Context) (jetstream.Stream, error) {
	p.mu.Lock()
	s := p.stream
	p.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := p.js.CreateOrUpdateStream(ctx, p.StreamConfig())
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamProcess, err)
	}
	p.mu.Lock()
	p.stream = s
	p.mu.Unlock()
	return s, nil
}

// forget drops the stream after an answer that says it is not there.
func (p *ProcessStreams) forget(err error) {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrNoResponders) {
		p.mu.Lock()
		p.stream = nil
		p.mu.Unlock()
	}
}

// Subject is ref's subject.
func (p *ProcessStreams) Subject(ref sandbox.ProcessRef) string {
	return p.sandboxSubject(ref.Key, ref.Kind, ref.Instance) + "." + ref.ID
}

func (p *ProcessStreams) sandboxSubject(key sandbox.Key, kind, instance string) string {
	return p.prefix + ".process." + Token(key.Scope) + "." + Token(kind) + "." + instanceToken(instance)
}

// instanceToken is a Docker instance ID (64 hex digits) as it is, anything else [Token]ed.
func instanceToken(id string) string {
	if len(id) == 64 && strings.Trim(id, "0123456789abcdef") == "" {
		return id
	}
	return Token(id)
}

func msgID(ref sandbox.ProcessRef, suffix string) string {
	return "prc_" + ref.Instance + "_" + ref.ID + "_" + suffix
}

// publish stores one record and waits for the stream's acknowledgement (a duplicate's
// included).
func (p *ProcessStreams) publish(ctx context.Context, msg *nats.Msg, id string, ttl time.Duration) (*jetstream.PubAck, error) {
	if !p.nc.IsConnected() {
		return nil, fmt.Errorf("%w: publish %s (%s)", ErrNotConnected, msg.Subject, p.nc.Status())
	}
	if _, err := p.ensure(ctx); err != nil {
		return nil, err
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(id), jetstream.WithExpectStream(StreamProcess)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	ack, err := p.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		p.forget(err)
		return nil, fmt.Errorf("events: publish %s: %w", msg.Subject, err)
	}
	return ack, nil
}

// ttl is the per-message age of a process that asked for less than the stream keeps.
func (p *ProcessStreams) ttl(ret *sandbox.OutputRetention) time.Duration {
	if ret == nil || ret.Age <= 0 || ret.Age >= p.age {
		return 0
	}
	return max(ret.Age, time.Second)
}

// processRecord is a start or exit record's payload.
type processRecord struct {
	ID        string               `json:"id"`
	PID       int                  `json:"pid,omitempty"`
	Argv0     string               `json:"argv0,omitempty"`
	Transport string               `json:"transport"`
	Durable   bool                 `json:"durable"`
	StartedAt time.Time            `json:"started_at"`
	Terminal  bool                 `json:"terminal,omitempty"`
	Exit      *processExitRecord   `json:"exit,omitempty"`
	Output    int64                `json:"output"`
	Retention *processRetentionRec `json:"retention,omitempty"`
}

type processExitRecord struct {
	Reason   string    `json:"reason"`
	ExitCode int       `json:"exit_code"`
	Signal   int       `json:"signal,omitempty"`
	At       time.Time `json:"at"`
}

type processRetentionRec struct {
	Bytes int64 `json:"bytes,omitempty"`
	AgeMS int64 `json:"age_ms,omitempty"`
}

func recordOf(proc sandbox.Process, ret *sandbox.OutputRetention) processRecord {
	r := processRecord{ID: proc.ID, PID: proc.PID, Transport: string(proc.Transport), Durable: proc.Durable, StartedAt: proc.StartedAt,
		Terminal: proc.Terminal != nil, Output: proc.Output}
	if len(proc.Argv) > 0 {
		r.Argv0 = truncate(proc.Argv[0], 120)
	}
	if e := proc.Exit; e != nil {
		r.Exit = &processExitRecord{Reason: string(e.Reason), ExitCode: e.ExitCode, Signal: int(e.Signal), At: e.At}
	}
	if ret != nil {
		r.Retention = &processRetentionRec{Bytes: ret.Bytes, AgeMS: ret.Age.Milliseconds()}
	}
	return r
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (r processRecord) process() sandbox.Process {
	out := sandbox.Process{ID: r.ID, PID: r.PID, Transport: sandbox.ProcessTransport(r.Transport), Durable: r.Durable,
		StartedAt: r.StartedAt, State: sandbox.ProcessStateRunning, Output: r.Output}
	if r.Argv0 != "" {
		out.Argv = []string{r.Argv0}
	}
	if e := r.Exit; e != nil {
		out.State = sandbox.ProcessStateExited
		out.Exit = &sandbox.ProcessExit{Reason: sandbox.ExitReason(e.Reason), ExitCode: e.ExitCode, Signal: sandbox.Signal(e.Signal), At: e.At}
	}
	return out
}

func (p *ProcessStreams) record(ctx context.Context, ref sandbox.ProcessRef, kind, suffix string, seq int64, body any, ret *sandbox.OutputRetention) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("events: encode a process record: %w", err)
	}
	msg := nats.NewMsg(p.Subject(ref))
	msg.Data = b
	msg.Header.Set(HeaderProcessRecord, kind)
	msg.Header.Set(HeaderProcessSeq, strconv.FormatInt(seq, 10))
	msg.Header.Set(HeaderContentType, "application/json")
	_, err = p.publish(ctx, msg, msgID(ref, suffix), p.ttl(ret))
	return err
}

// ProcessStarted stores proc's start record.
func (p *ProcessStreams) ProcessStarted(ctx context.Context, ref sandbox.ProcessRef, proc sandbox.Process, ret *sandbox.OutputRetention) error {
	return p.record(ctx, ref, RecordStart, "start", 0, recordOf(proc, ret), ret)
}

// ProcessOutput stores one piece of ref's output, whose first byte is at seq, and waits for
// the stream's acknowledgement; then it trims the subject to the process's retention.
func (p *ProcessStreams) ProcessOutput(ctx context.Context, ref sandbox.ProcessRef, c sandbox.OutputChunk, ret *sandbox.OutputRetention) error {
	subj := p.Subject(ref)
	msg := nats.NewMsg(subj)
	msg.Data = c.Data
	msg.Header.Set(HeaderProcessRecord, RecordOutput)
	msg.Header.Set(HeaderProcessSeq, strconv.FormatInt(c.Seq, 10))
	msg.Header.Set(HeaderProcessStream, c.Stream)
	if _, err := p.publish(ctx, msg, msgID(ref, "o"+strconv.FormatInt(c.Seq, 10)), p.ttl(ret)); err != nil {
		return err
	}
	p.trim(ctx, subj, c.End(), p.limit(ret))
	return nil
}

// ProcessCut stores that ref's output [cut.From, cut.To) was lost before it was stored.
func (p *ProcessStreams) ProcessCut(ctx context.Context, ref sandbox.ProcessRef, cut sandbox.OutputCut, ret *sandbox.OutputRetention) error {
	body := struct {
		From   int64  `json:"from"`
		To     int64  `json:"to"`
		Reason string `json:"reason"`
	}{cut.From, cut.To, cut.Reason}
	return p.record(ctx, ref, RecordCut, "c"+strconv.FormatInt(cut.From, 10), cut.From, body, ret)
}

// ProcessExited stores proc's exit record: its output ends at proc.Output.
func (p *ProcessStreams) ProcessExited(ctx context.Context, ref sandbox.ProcessRef, proc sandbox.Process, ret *sandbox.OutputRetention) error {
	return p.record(ctx, ref, RecordExit, "exit", proc.Output, recordOf(proc, ret), ret)
}

func (p *ProcessStreams) limit(ret *sandbox.OutputRetention) int64 {
	if ret != nil && ret.Bytes > 0 && ret.Bytes < p.bytes {
		return ret.Bytes
	}
	return p.bytes
}

// trim purges the oldest output of subj once it holds more than limit by a quarter, keeping
// at least the last limit bytes: a purge per quarter of the retention, not per message.
func (p *ProcessStreams) trim(ctx context.Context, subj string, end, limit int64) {
	p.mu.Lock()
	first, known := p.firsts[subj]
	p.mu.Unlock()
	if known && end-first <= limit+limit/4 {
		return
	}
	s, err := p.ensure(ctx)
	if err != nil {
		return
	}
	if !known {
		m, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
		if err != nil {
			return
		}
		first = headerSeq(m.Header)
		p.mu.Lock()
		p.firsts[subj] = first
		p.mu.Unlock()
		if end-first <= limit+limit/4 {
			return
		}
	}
	keep, err := p.locate(ctx, s, subj, end-limit)
	if err != nil || keep == nil {
		return
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(keep.Sequence)); err != nil {
		p.log.Info("process output not trimmed to its retention", zap.String("subject", subj), zap.Error(err))
		return
	}
	p.mu.Lock()
	p.firsts[subj] = headerSeq(keep.Header)
	p.mu.Unlock()
}

// ProcessResume is where ref's stored output ends: the sequence after its last stored byte
// (or cut), and whether its exit is stored.
func (p *ProcessStreams) ProcessResume(ctx context.Context, ref sandbox.ProcessRef) (int64, bool, error) {
	s, err := p.ensure(ctx)
	if err != nil {
		return 0, false, err
	}
	m, err := s.GetLastMsgForSubject(ctx, p.Subject(ref))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		p.forget(err)
		return 0, false, fmt.Errorf("events: last record of %s: %w", p.Subject(ref), err)
	}
	r := decode(m)
	return r.end(), r.kind == RecordExit, nil
}

// storedRecord is one record as read back.
type storedRecord struct {
	kind   string
	seq    int64 // the sequence of its first byte (a cut's from; an exit's end)
	to     int64 // a cut's end
	stream string
	data   []byte
	proc   *processRecord // start and exit
	reason string         // a cut's
	at     uint64         // its stream sequence
}

func (r storedRecord) end() int64 {
	switch r.kind {
	case RecordOutput:
		return r.seq + int64(len(r.data))
	case RecordCut:
		return r.to
	}
	return r.seq
}

func headerSeq(h nats.Header) int64 {
	n, _ := strconv.ParseInt(h.Get(HeaderProcessSeq), 10, 64)
	return n
}

func decode(m *jetstream.RawStreamMsg) storedRecord {
	r := storedRecord{kind: m.Header.Get(HeaderProcessRecord), seq: headerSeq(m.Header), at: m.Sequence}
	switch r.kind {
	case RecordOutput:
		r.data, r.stream = m.Data, m.Header.Get(HeaderProcessStream)
	case RecordCut:
		var c struct {
			From, To int64
			Reason   string
		}
		_ = json.Unmarshal(m.Data, &c)
		r.to, r.reason = max(c.To, r.seq), c.Reason
	case RecordStart, RecordExit:
		var pr processRecord
		if json.Unmarshal(m.Data, &pr) == nil {
			r.proc = &pr
		}
	}
	return r
}

// ProcessRecords is what the stream holds of the processes of one sandbox instance: each
// process's last record, as a process (running unless its exit is stored). Its argv is the
// program's name only: the stream keeps no command line.
func (p *ProcessStreams) ProcessRecords(ctx context.Context, key sandbox.Key, kind, instance string) ([]sandbox.Process, error) {
	s, err := p.ensure(ctx)
	if err != nil {
		return nil, err
	}
	base := p.sandboxSubject(key, kind, instance)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(base+".*"))
	if err != nil {
		p.forget(err)
		return nil, fmt.Errorf("events: the processes of %s: %w", base, err)
	}
	var out []sandbox.Process
	for subj := range info.State.Subjects {
		id := strings.TrimPrefix(subj, base+".")
		proc, err := p.lastState(ctx, s, sandbox.ProcessRef{Key: key, Kind: kind, Instance: instance, ID: id})
		if err != nil {
			return nil, err
		}
		out = append(out, proc)
	}
	return out, nil
}

// lastState is ref's state from its stored records: its start or exit record, and how much
// of its output is stored.
func (p *ProcessStreams) lastState(ctx context.Context, s jetstream.Stream, ref sandbox.ProcessRef) (sandbox.Process, error) {
	m, err := s.GetLastMsgForSubject(ctx, p.Subject(ref))
	if err != nil {
		return sandbox.Process{}, fmt.Errorf("events: last record of %s: %w", p.Subject(ref), err)
	}
	last := decode(m)
	if last.proc != nil && last.kind == RecordExit {
		return last.proc.process(), nil
	}
	proc := sandbox.Process{ID: ref.ID, State: sandbox.ProcessStateRunning}
	if first, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(p.Subject(ref))); err == nil {
		if r := decode(first); r.kind == RecordStart && r.proc != nil {
			proc = r.proc.process()
		}
	}
	proc.Output = last.end()
	return proc, nil
}
