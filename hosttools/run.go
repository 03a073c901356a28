package hosttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Framing is what a response file wraps around a delivered value ({"value": ... }), charged
// against both response caps with the value.
const Framing = len(frameOpen) + len(frameClose)

const (
	frameOpen  = `{"value": `
	frameClose = `}`
	// smallestValue is the shortest JSON value, so the budget checks before a tool runs ask
	// whether anything at all could still be delivered.
	smallestValue = 1
	// maxEcho is how much guest text one refusal quotes back.
	maxEcho = 120
)

// Refusal codes: why a call was answered with a sentence, in the order the checks run.
const (
	RefusedCap          = "cap"          // the run's call cap is exhausted
	RefusedName         = "name"         // the name is not a string
	RefusedUnknown      = "unknown"      // no tool of that name
	RefusedUndeclared   = "undeclared"   // undeclared under RequireDeclared
	RefusedIdentity     = "identity"     // the tool acts as the user
	RefusedArguments    = "arguments"    // the arguments are not an object
	RefusedBudget       = "budget"       // the response count or byte budget is spent
	RefusedBinding      = "binding"      // the arguments do not bind to the tool's parameters
	RefusedFailed       = "failed"       // the tool returned an error or panicked
	RefusedNotJSON      = "not_json"     // the result cannot be carried as JSON
	RefusedTooLarge     = "too_large"    // the result does not fit the per-response or remaining total cap
	RefusedUnfinished   = "unfinished"   // the run ended before the tool did
	RefusedBadRequest   = "bad_request"  // the request file is not a JSON object (transport)
	RefusedRequestLarge = "request_size" // the request file is larger than the host reads (transport)
)

// Answer is one call's outcome: exactly one of Value (the tool's result as JSON) and Refusal
// (a sentence the guest may read) is set.
type Answer struct {
	Value   json.RawMessage
	Refusal string
	Code    string // the refusal code; "" for a value
}

// Refused reports whether the call was refused.
func (a Answer) Refused() bool { return a.Refusal != "" }

// Frame is the response file's bytes: {"value": <json>} or {"refusal": "<sentence>"}.
func (a Answer) Frame() []byte {
	if a.Refused() {
		b, _ := json.Marshal(struct {
			Refusal string `json:"refusal"`
		}{a.Refusal})
		return b
	}
	return append(append([]byte(frameOpen), a.Value...), frameClose...)
}

// Called is what a run reports about one call to the hook of [WithCallReport].
type Called struct {
	Number  int    // 1 for the run's first call, refusals included
	Tool    string // the name as the guest sent it, at most 120 characters; "" when not a string
	Code    string // the refusal code, "" when a value was delivered
	Bytes   int    // delivered bytes, framing included; 0 for a refusal
	Seconds float64
}

// Run is one program's ledger over a sealed registry: the call cap and the response budgets.
// It is safe for concurrent use.
type Run struct {
	reg     *Registry
	logger  *zap.Logger
	reports []func(Called)
	obs     []sandbox.Observer // WithObserver
	obsAct  sandbox.Act        // the key and kind its acts concern
	runDir  string             // RunProgram's layout, for the acts

	mu             sync.Mutex
	calls          int
	delivered      int64
	deliveredBytes int64
}

// RunOption configures a [Run].
type RunOption func(*Run)

// WithCallReport calls report after every call, refused or not, on the calling goroutine. A
// panicking report is contained and logged.
func WithCallReport(report func(Called)) RunOption {
	return func(r *Run) {
		if report != nil {
			r.reports = append(r.reports, report)
		}
	}
}

// WithObserver reports every call to obs as a [sandbox.HostToolCalled] of key and kind, and
// the program [RunProgram] runs as one [sandbox.ExecFinished] (form program), synchronously
// on the calling goroutine; a panicking observer is contained and logged and never alters
// the call. A nil obs builds no act.
func WithObserver(obs sandbox.Observer, key sandbox.Key, kind string) RunOption {
	return func(r *Run) {
		if obs != nil {
			r.obs, r.obsAct = append(r.obs, obs), sandbox.Act{Key: key, Kind: kind}
		}
	}
}

// NewRun seals the registry and starts a fresh ledger.
func (r *Registry) NewRun(opts ...RunOption) *Run {
	r.seal()
	run := &Run{reg: r, logger: r.opts.logger}
	for _, opt := range opts {
		if opt != nil {
			opt(run)
		}
	}
	return run
}

// Registry is the registry the run resolves through.
func (r *Run) Registry() *Registry { return r.reg }

// Calls is how many calls the run has made, refusals included.
func (r *Run) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Call calls the tool name with args; see [Run.CallJSON].
func (r *Run) Call(ctx context.Context, name string, args Arguments) Answer {
	n, _ := json.Marshal(name)
	a, _ := json.Marshal(args)
	if args == nil {
		a = nil
	}
	return r.CallJSON(ctx, n, a)
}

// CallJSON answers one call whose name and arguments are the guest's JSON (arguments may be
// absent or null, meaning none). Every call counts toward the cap, refusals included; the
// checks run in protocol §11.3's order and each ends the call with a refusal sentence, never
// an error. A response slot is reserved while the tool runs and returned when nothing is
// delivered. The tool runs on a context that the run's deadline does not cancel; when ctx
// ends first, CallJSON returns a refusal with code [RefusedUnfinished] and the tool goes on.
func (r *Run) CallJSON(ctx context.Context, name, arguments json.RawMessage) Answer {
	start := time.Now()
	number := r.count()
	shown := ""
	var s string
	if json.Unmarshal(name, &s) == nil {
		shown = bounded(s)
	}
	a := r.call(ctx, number, name, arguments)
	r.report(ctx, number, shown, a, start)
	return a
}

// refuseRequest answers a request the transport could not read as a call (not JSON, not an
// object, too large) with a, counted and reported like any call: the guest made it, so it
// takes a number under the cap, and the cap's refusal comes first.
func (r *Run) refuseRequest(ctx context.Context, a Answer) Answer {
	start := time.Now()
	number := r.count()
	if number > r.reg.opts.maxCalls {
		a = capRefusal(r.reg.opts.maxCalls)
	}
	r.report(ctx, number, "", a, start)
	return a
}

// count takes the next call number.
func (r *Run) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.calls
}

// report hands one call's outcome to every hook of [WithCallReport] and to the observer.
func (r *Run) report(ctx context.Context, number int, shown string, a Answer, start time.Time) {
	if len(r.reports) == 0 && len(r.obs) == 0 {
		return
	}
	took := time.Since(start)
	c := Called{Number: number, Tool: shown, Code: a.Code, Seconds: took.Seconds()}
	if !a.Refused() {
		c.Bytes = len(a.Value) + Framing
	}
	for _, report := range r.reports {
		r.contain(func() { report(c) })
	}
	act := r.obsAct
	act.Took = took
	called := sandbox.HostToolCalled{Act: act, RunDir: r.runDir, Tool: c.Tool, Call: c.Number, Refusal: c.Code, Bytes: c.Bytes}
	for _, obs := range r.obs {
		r.contain(func() { obs.HostToolCalled(ctx, called) })
	}
}

// contain runs report, containing its panic.
func (r *Run) contain(report func()) {
	defer func() {
		if p := recover(); p != nil {
			r.logger.Warn("host tools: an observer of calls panicked", zap.Any("panic", p))
		}
	}()
	report()
}

func refuse(code, format string, args ...any) Answer {
	return Answer{Refusal: fmt.Sprintf(format, args...), Code: code}
}

func capRefusal(cap int) Answer {
	return refuse(RefusedCap, "Error: this run's host-tool call cap (%d) is exhausted; finish with the results already delivered and report what remains undone", cap)
}

func (r *Run) call(ctx context.Context, number int, rawName, rawArgs json.RawMessage) Answer {
	if number > r.reg.opts.maxCalls {
		return capRefusal(r.reg.opts.maxCalls)
	}
	var name string
	if err := json.Unmarshal(rawName, &name); err != nil || len(rawName) == 0 {
		return refuse(RefusedName, "Error: a host tool name must be a string, not %s", jsonKind(rawName))
	}
	tool, ok := r.reg.lookup(name)
	if !ok {
		return refuse(RefusedUnknown, "Error: %q is not a registered host tool", bounded(name))
	}
	if tool.Declaration == nil && r.reg.opts.requireDeclared {
		return refuse(RefusedUndeclared, "Error: %q carries no complete declaration, and this host calls declared tools only", name)
	}
	if id, acts := identityOf(tool); acts && id == sandbox.IdentityUser {
		return refuse(RefusedIdentity, "Error: %q exercises the user's identity, which this host cannot serve: it mints no user authority", name)
	}
	args := Arguments{}
	if trimmed := bytes.TrimSpace(rawArgs); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if trimmed[0] != '{' || json.Unmarshal(trimmed, &args) != nil {
			return refuse(RefusedArguments, "Error: arguments for %q must be a JSON object of keyword arguments", name)
		}
	}
	limits := r.reg.opts.limits
	r.mu.Lock()
	switch {
	case r.delivered+1 > limits.MaxFiles:
		r.mu.Unlock()
		return refuse(RefusedBudget, "Error: this run's delivered-response cap (%d) is exhausted; finish with the results already delivered", limits.MaxFiles)
	case r.deliveredBytes+smallestValue+int64(Framing) > limits.MaxTotalBytes:
		r.mu.Unlock()
		return refuse(RefusedBudget, "Error: this run's response byte budget (%d) is exhausted; finish with the results already delivered", limits.MaxTotalBytes)
	case smallestValue+int64(Framing) > limits.MaxBytesPerFile:
		r.mu.Unlock()
		return refuse(RefusedBudget, "Error: no host-tool response can fit this run's per-response cap; report this and carry on without host tools")
	}
	r.mu.Unlock()
	if !tool.AnyArguments {
		if why := bind(tool.Params, args); why != "" {
			return refuse(RefusedBinding, "Error: arguments do not bind to host tool %q: %s", name, bounded(why))
		}
	}
	// The slot is reserved across the call and given back unless a value is delivered.
	r.mu.Lock()
	r.delivered++
	r.mu.Unlock()
	a := r.deliver(ctx, number, tool, args, limits)
	if a.Refused() {
		r.mu.Lock()
		r.delivered--
		r.mu.Unlock()
	}
	return a
}

type outcome struct {
	value any
	err   error
}

func (r *Run) deliver(ctx context.Context, number int, tool Tool, args Arguments, limits sandbox.TransferLimits) Answer {
	done := make(chan outcome, 1)
	toolCtx := context.WithoutCancel(ctx)
	go func() {
		var o outcome
		defer func() {
			if p := recover(); p != nil {
				o = outcome{err: fmt.Errorf("panic: %v", p)}
			}
			done <- o
		}()
		o.value, o.err = tool.Func(toolCtx, args)
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		r.logger.Warn("host tools: the run ended while a tool was running; the tool goes on, its result is dropped",
			zap.String("tool", tool.Name), zap.Int("call", number))
		return refuse(RefusedUnfinished, "Error: the run ended before host tool %q finished", tool.Name)
	}
	if o.err != nil {
		r.logger.Warn("host tools: a tool failed", zap.String("tool", tool.Name), zap.Int("call", number), zap.Error(o.err))
		return refuse(RefusedFailed, "Error: host tool %q failed; the reason is in the host's log", tool.Name)
	}
	encoded, err := json.Marshal(o.value)
	if err == nil && !utf8.Valid(encoded) {
		err = errors.New("result is not valid UTF-8")
	}
	if err != nil {
		r.logger.Warn("host tools: a tool returned a value JSON cannot carry", zap.String("tool", tool.Name), zap.Error(err))
		return refuse(RefusedNotJSON, "Error: host tool %q returned a value that cannot be carried as JSON", tool.Name)
	}
	crossing := int64(len(encoded) + Framing)
	if crossing > limits.MaxBytesPerFile {
		return refuse(RefusedTooLarge, "Error: host tool %q's response is %d bytes and the per-response cap allows %d", tool.Name, crossing, limits.MaxBytesPerFile)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deliveredBytes+crossing > limits.MaxTotalBytes {
		return refuse(RefusedTooLarge, "Error: delivering host tool %q's %d-byte response would exceed this run's total response cap (%d bytes)", tool.Name, crossing, limits.MaxTotalBytes)
	}
	r.deliveredBytes += crossing
	return Answer{Value: encoded}
}

// bind checks names and arity the way a keyword call binds: no unknown names, every required
// one present. It returns why not, or "".
func bind(params []Param, args Arguments) string {
	known := map[string]bool{}
	for _, p := range params {
		known[p.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if !known[name] {
			return fmt.Sprintf("got an unexpected keyword argument %q", name)
		}
	}
	for _, p := range params {
		if _, ok := args[p.Name]; p.Required && !ok {
			return fmt.Sprintf("missing a required argument: %q", p.Name)
		}
	}
	return ""
}

// bounded cuts guest text to maxEcho characters.
func bounded(s string) string {
	if utf8.RuneCountInString(s) <= maxEcho {
		return s
	}
	return string([]rune(s)[:maxEcho]) + " (truncated)"
}

// jsonKind names a JSON value's type for a refusal, never its content.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "missing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
