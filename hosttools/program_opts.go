package hosttools

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Defaults of [RunProgram].
const (
	DefaultPollInterval = 200 * time.Millisecond
	DefaultInterpreter  = "python3"
	DefaultCallTimeout  = 300 * time.Second // the guest's patience for one answer
	// MaxReadAhead is how many request numbers one look may stat at once.
	MaxReadAhead = 4
	// finalLookGrace is what the last look for the exit marker and the output may spend once
	// the run's bound is gone; killGrace the signal; reclaimGrace the removal of host_tools/;
	// answerGrace writing one answer after the bound (a tool that acted deserves its record).
	finalLookGrace = 2 * time.Second
	killGrace      = 5 * time.Second
	reclaimGrace   = 10 * time.Second
	answerGrace    = 2 * time.Second
	markerCap      = 32
	// quickLook is the first pause after a served request; it doubles up to the poll
	// interval while no request comes.
	quickLook = 10 * time.Millisecond
	// maxLookFailures is how many file-plane failures in a row a run absorbs before it
	// ends with the last one.
	maxLookFailures = 3
)

// Hint wakes the supervisor before its next poll: a send means "look now". It is only a
// hint; requests are always read through the confined file plane, and the poll remains the
// floor. A Hint is started once the program is launched, just before its start gate opens,
// and stopped by cancelling its ctx; closing the channel says it ended. See [WatcherHint].
type Hint func(ctx context.Context, sb sandbox.Sandbox, l Layout) <-chan struct{}

// ProgramOption configures one [RunProgram].
type ProgramOption func(*programOptions) error

type programOptions struct {
	poll        time.Duration
	interpreter string
	callTimeout time.Duration
	logger      *zap.Logger
	hint        Hint
	hintSet     bool // WithHint was given, nil included
}

func defaultProgramOptions() programOptions {
	return programOptions{poll: DefaultPollInterval, interpreter: DefaultInterpreter,
		callTimeout: DefaultCallTimeout, logger: zap.NewNop()}
}

// WithPollInterval sets how often the supervisor looks for requests and the exit marker
// (default 200 ms); it must be positive.
func WithPollInterval(d time.Duration) ProgramOption {
	return func(o *programOptions) error {
		if d <= 0 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("hosttools: poll interval %s must be positive", d)}
		}
		o.poll = d
		return nil
	}
}

// WithInterpreter sets the guest command that runs the program (default python3).
func WithInterpreter(cmd string) ProgramOption {
	return func(o *programOptions) error {
		if cmd == "" {
			return &sandbox.InvalidArgumentError{Reason: "hosttools: the interpreter must be non-empty"}
		}
		o.interpreter = cmd
		return nil
	}
}

// WithCallTimeout sets the guest's patience for one answer (default 300 s). It is raised to
// the run's timeout when shorter, so the guest never gives up on a call still being served.
func WithCallTimeout(d time.Duration) ProgramOption {
	return func(o *programOptions) error {
		if d <= 0 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("hosttools: call timeout %s must be positive", d)}
		}
		o.callTimeout = d
		return nil
	}
}

// WithProgramLogger sets the supervisor's logger (default zap.NewNop()).
func WithProgramLogger(l *zap.Logger) ProgramOption {
	return func(o *programOptions) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithHint sets how the supervisor learns of a request sooner than its next poll; nil turns
// hints off, leaving the poll alone. Without it, a sandbox that streams exec output
// ([sandbox.StreamingExec]) gets [WatcherHint].
func WithHint(h Hint) ProgramOption {
	return func(o *programOptions) error { o.hint, o.hintSet = h, true; return nil }
}

// hintFor is the run's hint source: the one given, else the watcher where the sandbox can
// stream it.
func (o programOptions) hintFor(sb sandbox.Sandbox, bound time.Duration) Hint {
	if o.hintSet {
		return o.hint
	}
	if _, ok := sb.(sandbox.StreamingExec); ok {
		return WatcherHint(bound)
	}
	return nil
}
