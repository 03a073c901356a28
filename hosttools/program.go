package hosttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// RunProgram runs source as the guest program of a fresh run directory and serves its
// host-tool calls until it leaves its exit marker or timeout, which bounds the whole program,
// passes. It writes the shim, the program and the launcher into l.Transport, starts the
// launcher with one Exec, checks its receipt, opens the start gate, and then polls: the next
// request numbers in order, up to [MaxReadAhead] at a look while they keep coming, and the
// exit marker when no request is waiting; requests are served strictly in number order, at
// most MaxCallsPerRun+1 of them (the last one hears that the cap is gone). After a served
// request it looks again within 10 ms, backing off to the poll interval while nothing comes;
// a look that fails is retried at the next poll, up to three in a row. A hint (see
// [WatcherHint], the default where the sandbox streams exec output) brings a look forward
// while the supervisor is backing off. A running tool is never
// cancelled, but the run's bound still holds: the supervisor stops waiting for it.
//
// Before the launch and after the run, on every path, it ends every process in the sandbox
// that no live exec holds, but for the container's own (PID 1 and its session): whatever an
// earlier run or exec left running, however it detached, so that nothing but this run's
// program can make its calls or write its marker. Background processes an earlier exec
// started do not outlive a run; two runs at once in one sandbox end each other's programs.
// A sweep that finds processes it cannot signal fails the run with [ErrLeftoverProcesses].
//
// It returns the program's combined output and the exit code its marker claims; the marker
// is the guest's claim, so a program can write it and then exit whenever it likes within the
// run, and anything it started is ended with the run (dispose to be sure of more). When
// the bound passes it takes a final look for the marker, reads the output so far, sends
// SIGKILL (to the process group only when the receipt named one) and fails with
// [*sandbox.ProgramTimeoutError]. Sandbox failures are returned as they are, after the
// program is signalled. host_tools/ is removed with [sandbox.Sandbox.Reclaim] on every path;
// l.Work is the caller's to collect from and then reclaim ([ReclaimRun]).
//
// The sandbox must serve exec, files_in and files_out; files_list is never needed.
func RunProgram(ctx context.Context, sb sandbox.Sandbox, run *Run, l Layout, source []byte,
	timeout time.Duration, opts ...ProgramOption) (sandbox.ExecResult, error) {
	o := defaultProgramOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return sandbox.ExecResult{}, err
		}
	}
	switch {
	case timeout <= 0:
		return sandbox.ExecResult{}, invalid("the run's timeout %s must be positive", timeout)
	case run == nil || sb == nil:
		return sandbox.ExecResult{}, invalid("RunProgram needs a sandbox and a run")
	case l.Dir == "":
		return sandbox.ExecResult{}, invalid("RunProgram needs a layout from NewLayout")
	}
	o.callTimeout = max(o.callTimeout, timeout+finalLookGrace)
	start := time.Now()
	run.runDir = l.Dir
	res, err := runProgram(sandbox.WithinAct(ctx), sb, run, l, source, timeout, o)
	run.reportProgram(ctx, start, sb, source, res, err)
	return res, err
}

// runProgram is RunProgram once its arguments are checked, its many sandbox calls parts of the
// one act it reports.
func runProgram(ctx context.Context, sb sandbox.Sandbox, run *Run, l Layout, source []byte, timeout time.Duration, o programOptions) (sandbox.ExecResult, error) {
	s := &supervisor{sb: sb, run: run, l: l, o: o, timeout: timeout, logger: o.logger.With(zap.String("run", l.Dir))}
	if err := s.sweepBefore(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	defer s.reclaim(ctx)
	defer s.sweepAfter(ctx)
	return s.supervise(ctx, source)
}

// reportProgram reports the program's run to the run's observer: one command of form program,
// its output counted as stdout.
func (r *Run) reportProgram(ctx context.Context, start time.Time, sb sandbox.Sandbox, source []byte, res sandbox.ExecResult, err error) {
	if len(r.obs) == 0 {
		return
	}
	act := r.obsAct
	act.InstanceID, act.Took, act.Err = sb.InstanceID(), time.Since(start), err
	a := sandbox.ExecFinished{Act: act, Form: sandbox.FormProgram}
	_, a.CommandSHA256 = sandbox.CommandDigest(nil, string(source), sandbox.FormProgram)
	if err == nil {
		a.ExitCode, a.StdoutBytes = res.ExitCode, int64(len(res.StdoutBytes))
	}
	for _, obs := range r.obs {
		r.contain(func() { obs.ExecFinished(ctx, a) })
	}
}

// ReclaimRun removes a run directory, work/ included, once the caller has collected from it.
func ReclaimRun(ctx context.Context, sb sandbox.Sandbox, l Layout, timeout time.Duration) error {
	return sb.Reclaim(ctx, path.Base(l.Dir), path.Dir(l.Dir), timeout)
}

type supervisor struct {
	sb      sandbox.Sandbox
	run     *Run
	l       Layout
	o       programOptions
	timeout time.Duration
	logger  *zap.Logger

	deadline time.Time
	receipt  *Receipt
	hint     <-chan struct{} // nil without a hint source
}

// expiredBy reports whether err (or the clock) says the run's own bound passed, as against
// the caller abandoning the call.
func (s *supervisor) expiredBy(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var te *sandbox.TimeoutError
	return !time.Now().Before(s.deadline) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te)
}

func (s *supervisor) supervise(ctx context.Context, source []byte) (sandbox.ExecResult, error) {
	s.deadline = time.Now().Add(s.timeout)
	dctx, cancel := context.WithDeadline(ctx, s.deadline)
	defer cancel()
	if ended, err := s.launch(ctx, dctx, source); ended != nil || err != nil {
		if ended == nil {
			ended = &sandbox.ExecResult{}
		}
		return *ended, err
	}
	// The hint starts before the gate opens, so it watches before the first request can
	// be made; it ends with dctx, and on its own once host_tools/ is gone.
	if h := s.o.hintFor(s.sb, s.timeout); h != nil {
		s.hint = h(dctx, s.sb, s.l)
	}
	if err := s.write(dctx, s.l.Gate, []byte("start\n"), "open the start gate"); err != nil {
		return s.failed(ctx, err, "open the start gate")
	}
	return s.poll(ctx, dctx)
}

// launch writes the run's files and starts the launcher. The run goes on only when both
// returns are nil: otherwise it ended there, with that result or that error.
func (s *supervisor) launch(ctx, dctx context.Context, source []byte) (*sandbox.ExecResult, error) {
	uploads := []struct {
		p string
		b []byte
	}{{s.l.Shim, Shim}, {s.l.Program, source},
		{s.l.Launcher, []byte(launcherScript(s.l, s.o.interpreter, s.o.callTimeout.Seconds()))}}
	for _, u := range uploads {
		if err := s.sb.WriteFile(dctx, s.l.rel(u.p), u.b, s.l.Dir); err != nil {
			if s.expiredBy(ctx, err) {
				return nil, s.timeoutError(nil, "", sandbox.SignalAbsent, sandbox.ReachNothing)
			}
			return nil, fmt.Errorf("write %s: %w", path.Base(u.p), err)
		}
	}
	started, err := s.sb.Exec(dctx, sandbox.Shell("sh "+shq(s.l.Launcher)), s.l.Dir, time.Until(s.deadline))
	switch {
	case err != nil && s.expiredBy(ctx, err):
		// No receipt, so no gate: whatever the launcher detached waits, and leaves once
		// host_tools/ is gone. Nothing here can say more than that.
		return nil, s.timeoutError(nil, "", sandbox.SignalUnrecorded, sandbox.ReachNothing)
	case err != nil:
		return nil, fmt.Errorf("start the launcher: %w", err)
	case started.ExitCode != 0:
		if len(started.StderrBytes) == 0 {
			started.StderrBytes = []byte("the launcher did not start the program")
		}
		return &started, nil
	}
	rc, ok := parseReceipt(started.Stdout())
	if !ok {
		return nil, ErrNoReceipt
	}
	s.receipt = &rc
	s.logger.Debug("host tools: program launched", zap.Int("pid", rc.PID), zap.Int("pgid", rc.PGID))
	return nil, nil
}

// pollState is the poll loop's memory between looks.
type pollState struct {
	served   int           // request numbers consumed
	window   int           // how many numbers the next look reads ahead
	pause    time.Duration // the next wait when no hint comes
	failures int           // looks failed in a row
	retry    bool          // the last look failed: the next wait is a whole poll, unhinted
	hinted   bool          // the wait that led to this look ended on a hint
	hintGap  time.Duration // how long after a look a hint may wake the next one
	looked   time.Time     // when the last look ended
}

// poll looks, serves, and waits, until the marker, a failure, or the bound.
func (s *supervisor) poll(ctx, dctx context.Context) (sandbox.ExecResult, error) {
	p := &pollState{window: 1, pause: s.o.poll}
	for {
		if !time.Now().Before(s.deadline) {
			return s.expired(ctx)
		}
		marker, what, err := s.step(ctx, dctx, p)
		switch {
		case err != nil:
			return s.failed(ctx, err, what)
		case marker != nil:
			return s.completed(ctx, marker)
		}
		if !s.sleep(ctx, p) {
			return s.failed(ctx, ctx.Err(), "wait")
		}
	}
}

// step is one look and what it found served; the marker when the program has exited.
func (s *supervisor) step(ctx, dctx context.Context, p *pollState) ([]byte, string, error) {
	bound := s.run.reg.opts.maxCalls + 1
	count := min(p.window, bound-p.served)
	marker, reqs, err := s.look(dctx, p.served, count)
	p.looked = time.Now()
	if err != nil && !s.expiredBy(ctx, err) && p.failures < maxLookFailures-1 {
		// A look that failed acted on nothing, so it is retried at the next poll: Docker's
		// freezer can refuse a busy guest for a moment ("unable to freeze"). A failure
		// that persists ends the run as itself.
		p.failures++
		p.retry = true
		s.logger.Warn("host tools: a look failed; retrying at the next poll", zap.Int("attempt", p.failures), zap.Error(err))
		return nil, "", nil
	}
	if err != nil {
		return nil, "look for requests", err
	}
	p.failures, p.retry = 0, false
	if marker != nil {
		return marker, "", nil
	}
	if len(reqs) > 0 && reqs[0].present {
		// A hint that came while this look ran is most likely for what it found; the quick
		// look after the answer covers the rest. Kept, it would wake an empty look.
		select {
		case <-s.hint:
		default:
		}
	}
	n, full, err := s.serve(ctx, dctx, p.served, reqs)
	if n > 0 {
		p.looked = time.Now() // the answers were file-plane calls too: hints count from them
	}
	p.served += n
	if err != nil {
		return nil, "serve a request", err
	}
	switch {
	case !full:
		p.window = 1
	case count == p.window && p.served < bound:
		p.window = min(MaxReadAhead, p.window*2)
	}
	p.paced(n > 0, s.o.poll)
	return nil, "", nil
}

// paced sets the next waits from what a look found. A program that just got an answer often
// calls again at once: look again soon, and back off to the poll interval while nothing
// comes. A hint is trusted while it pays: one whose look found nothing doubles the time a
// later hint must wait after a look (up to the poll interval), so a guest that floods hints
// gets no more looks than the poll gives it.
func (p *pollState) paced(found bool, poll time.Duration) {
	switch {
	case found:
		// Not even a hint brings the next look sooner than the quick look: back-to-back
		// freezes are where Docker 20.10's late "paused" events bite (see actors/freeze.go).
		p.pause, p.hintGap = quickLook, quickLook
	default:
		p.pause = min(poll, p.pause*2)
	}
	if p.hinted && !found {
		p.hintGap = min(poll, max(quickLook, p.hintGap*2))
	}
}

// sleep waits for the next look: the pause (never past the deadline, never more than the
// poll interval), or a hint, but no sooner than hintGap after the last look. A failed look
// waits a whole poll, unhinted. False when ctx ended first.
func (s *supervisor) sleep(ctx context.Context, p *pollState) bool {
	d, hint := p.pause, s.hint
	if p.retry {
		d, hint = s.o.poll, nil
	}
	d = min(d, s.o.poll, max(0, time.Until(s.deadline)))
	end := time.Now().Add(d)
	wait := time.NewTimer(d)
	defer wait.Stop()
	p.hinted = false
	for {
		select {
		case <-wait.C:
			return true
		case _, ok := <-hint:
			if !ok {
				hint, s.hint = nil, nil // the source ended: the poll alone from here
				continue
			}
			p.hinted = true
			early := time.Until(p.looked.Add(p.hintGap))
			if early <= 0 {
				return true
			}
			// Too soon after the last look: the hint brings the look forward only to the
			// gap, and later hints in this wait change nothing.
			hint = nil
			if early < time.Until(end) && wait.Stop() {
				wait.Reset(early)
			}
		case <-ctx.Done():
			return false
		}
	}
}

// probe is one file looked at: absent, a body, or too large to read.
type probe struct {
	body     []byte
	present  bool
	tooLarge bool
	err      error
}

// look reads the requests served+1..served+count in order, stopping at the first that is not
// there (strict order: nothing past a missing number can be served yet), and, only when the
// first is not there, the exit marker: a program waiting on an answer has not exited. One call
// at a time: a backend that freezes the guest around each file-plane call serialises them
// anyway, and every look is one more freeze.
func (s *supervisor) look(ctx context.Context, served, count int) (marker []byte, reqs []probe, err error) {
	for i := range count {
		r := s.read(ctx, requestPath(s.l, served+1+i), s.run.reg.opts.limits.MaxBytesPerFile)
		if r.err != nil {
			return nil, nil, r.err
		}
		reqs = append(reqs, r)
		if !r.present {
			break
		}
	}
	if len(reqs) > 0 && reqs[0].present {
		return nil, reqs, nil
	}
	m := s.read(ctx, s.l.ExitCode, markerCap)
	switch {
	case m.err != nil:
		return nil, nil, m.err
	case m.present && m.tooLarge:
		return []byte("x"), nil, nil // a marker that is not a number claims failure
	case m.present:
		return m.body, nil, nil
	}
	return nil, nil, nil
}

func requestPath(l Layout, n int) string {
	return path.Join(l.Calls, fmt.Sprintf("%04d.request.json", n))
}

func responsePath(l Layout, n int) string {
	return path.Join(l.Calls, fmt.Sprintf("%04d.response.json", n))
}

// read reads p within limit in one call, with no stat first: a file that is there costs one
// round trip, not two, and a missing one the same one a stat would. Anything but a non-empty
// regular file (missing, a directory, a link, an empty file a writer has not renamed into
// place) has not arrived yet.
func (s *supervisor) read(ctx context.Context, p string, limit int64) probe {
	b, err := s.sb.ReadFile(ctx, s.l.rel(p), s.l.Dir, limit)
	var capErr *sandbox.TransferCapExceededError
	var notRegular *sandbox.NotRegularError
	switch {
	case errors.As(err, &capErr):
		return probe{present: true, tooLarge: true}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, sandbox.ErrIsDirectory), errors.As(err, &notRegular):
		return probe{}
	case err != nil:
		return probe{err: fmt.Errorf("read %s: %w", path.Base(p), err)}
	case len(b) == 0:
		return probe{}
	case int64(len(b)) > limit:
		return probe{present: true, tooLarge: true}
	}
	return probe{present: true, body: b}
}

// serve answers the contiguous prefix of found requests in number order and returns how
// many numbers it consumed and whether the whole window was found.
func (s *supervisor) serve(ctx, dctx context.Context, served int, reqs []probe) (int, bool, error) {
	n := 0
	for _, r := range reqs {
		if !r.present {
			return n, false, nil
		}
		if !time.Now().Before(s.deadline) {
			return n, false, nil // left unserved: the bound is gone
		}
		number := served + n + 1
		a, answer := s.answer(dctx, number, r)
		if a.Code == RefusedUnfinished {
			return n, false, nil // the bound passed while the tool ran; the loop reports it
		}
		n++
		if !answer {
			s.logger.Debug("host tools: stepping over an abandoned request", zap.Int("call", number))
			continue
		}
		// The tool has acted: its answer gets a grace past the deadline.
		wctx, cancel := context.WithDeadline(ctx, later(s.deadline, time.Now().Add(answerGrace)))
		err := s.write(wctx, responsePath(s.l, number), a.Frame(), "write an answer")
		cancel()
		if err != nil {
			return n, false, fmt.Errorf("write the answer to %04d: %w", number, err)
		}
	}
	return n, true, nil
}

// write writes a file of the transport, trying up to maxLookFailures times: Docker's freezer
// can refuse a guest that is busy forking ("unable to freeze"), as it is right after launch.
func (s *supervisor) write(ctx context.Context, p string, b []byte, what string) error {
	var err error
	for attempt := range maxLookFailures {
		if err = s.sb.WriteFile(ctx, s.l.rel(p), b, s.l.Dir); err == nil || ctx.Err() != nil {
			return err
		}
		s.logger.Warn("host tools: a write failed; retrying", zap.String("op", what), zap.Int("attempt", attempt+1), zap.Error(err))
		t := time.NewTimer(time.Duration(attempt+1) * 2 * quickLook)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
	return err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// answer turns one request file into its answer; false for an abandoned number, which gets
// none and is no call. A request the host cannot read is still a call the guest made: it is
// counted and reported with its refusal.
func (s *supervisor) answer(ctx context.Context, number int, r probe) (Answer, bool) {
	if r.tooLarge {
		return s.run.refuseRequest(ctx, refuse(RefusedRequestLarge, "Error: this host-tool request is larger than the host will read; pass less, or write it to a file in the working directory")), true
	}
	body := bytes.TrimSpace(r.body)
	if !utf8.Valid(body) || !json.Valid(body) {
		return s.run.refuseRequest(ctx, refuse(RefusedBadRequest, "Error: this host-tool request is not valid JSON")), true
	}
	if len(body) == 0 || body[0] != '{' {
		return s.run.refuseRequest(ctx, refuse(RefusedBadRequest, "Error: a host-tool request must be a JSON object")), true
	}
	var req struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Abandoned json.RawMessage `json:"abandoned"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return s.run.refuseRequest(ctx, refuse(RefusedBadRequest, "Error: this host-tool request is not valid JSON")), true
	}
	if bytes.Equal(bytes.TrimSpace(req.Abandoned), []byte("true")) {
		return Answer{}, false
	}
	return s.run.CallJSON(ctx, req.Name, req.Arguments), true
}

// completed reads the output of a program whose exit marker is present.
func (s *supervisor) completed(ctx context.Context, marker []byte) (sandbox.ExecResult, error) {
	code, err := strconv.Atoi(strings.TrimSpace(string(marker)))
	if err != nil {
		code = 1 // a marker that is not a number is not a success
	}
	// What is left of the run, or the final look's grace when less is left: a finished
	// run's output is its result.
	gctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), later(s.deadline, time.Now().Add(finalLookGrace)))
	defer cancel()
	res := sandbox.ExecResult{ExitCode: code}
	out, note := s.output(gctx)
	res.StdoutBytes = out
	if note != "" {
		res.StderrBytes = []byte(note)
	}
	return res, nil
}

// output reads what the program printed, within the run's total response budget.
func (s *supervisor) output(ctx context.Context) ([]byte, string) {
	limit := s.run.reg.opts.limits.MaxTotalBytes
	p := s.read(ctx, s.l.Output, limit)
	switch {
	case p.err != nil:
		s.logger.Warn("host tools: the program's output could not be read", zap.Error(p.err))
		return nil, "the program's output could not be read"
	case p.tooLarge:
		return nil, fmt.Sprintf("the program printed more than %d bytes, which the host does not read", limit)
	}
	return p.body, ""
}

// expired is the run's own bound passing: a final look for the marker, the output so far,
// the signal, the error.
func (s *supervisor) expired(ctx context.Context) (sandbox.ExecResult, error) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalLookGrace)
	m := s.read(gctx, s.l.ExitCode, markerCap)
	cancel()
	if m.err == nil && m.present && !m.tooLarge {
		return s.completed(ctx, m.body)
	}
	// The output has a grace of its own: on a frozen file plane under load the look alone
	// can take most of one, and the output is what the caller most needs.
	gctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finalLookGrace)
	out, note := s.output(gctx)
	cancel()
	fate, reach := s.stop(ctx)
	return sandbox.ExecResult{}, s.timeoutError(out, note, fate, reach)
}

// failed ends a run that started a program on a failure other than its bound: the program is
// signalled unless its marker is already there, and err is returned.
func (s *supervisor) failed(ctx context.Context, err error, what string) (sandbox.ExecResult, error) {
	if s.expiredBy(ctx, err) {
		return s.expired(ctx)
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalLookGrace)
	m := s.read(gctx, s.l.ExitCode, markerCap)
	cancel()
	if !m.present {
		fate, reach := s.stop(ctx)
		s.logger.Warn("host tools: the run failed; the program was signalled", zap.String("op", what),
			zap.String("signal", string(fate)), zap.String("reach", string(reach)), zap.Error(err))
	}
	return sandbox.ExecResult{}, fmt.Errorf("host tools: %s: %w", what, err)
}

// stop sends SIGKILL: to the process group when the receipt named one, else to the pid.
func (s *supervisor) stop(ctx context.Context) (sandbox.SignalOutcome, sandbox.SignalReach) {
	if s.receipt == nil {
		return sandbox.SignalUnrecorded, sandbox.ReachNothing
	}
	target, reach := strconv.Itoa(s.receipt.PID), sandbox.ReachProgram
	if s.receipt.PGID > 0 {
		target, reach = "-"+strconv.Itoa(s.receipt.PGID), sandbox.ReachGroup
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
	defer cancel()
	res, err := s.sb.Exec(kctx, sandbox.Shell("kill -KILL "+target), "/", killGrace)
	switch {
	case err != nil:
		s.logger.Warn("host tools: the signal could not be sent", zap.Error(err))
		return sandbox.SignalUnknown, sandbox.ReachNothing
	case res.ExitCode != 0:
		return sandbox.SignalRefused, sandbox.ReachNothing
	}
	return sandbox.SignalSent, reach
}

func (s *supervisor) timeoutError(out []byte, note string, fate sandbox.SignalOutcome, reach sandbox.SignalReach) error {
	shown := sandbox.DecodeReplace(out)
	if r := []rune(shown); len(r) > 2000 {
		shown = string(r[:2000])
	}
	return &sandbox.ProgramTimeoutError{Timeout: s.timeout, Output: shown, OutputBytes: out, Note: note, Signal: fate, Reach: reach}
}

// reclaim removes host_tools/ on every path, on a grace of its own.
func (s *supervisor) reclaim(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reclaimGrace)
	defer cancel()
	if err := s.sb.Reclaim(rctx, TransportDir, s.l.Dir, reclaimGrace); err != nil {
		s.logger.Warn("host tools: host_tools/ could not be removed; later runs in this sandbox can read it", zap.Error(err))
	}
}
