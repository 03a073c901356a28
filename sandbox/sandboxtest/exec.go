package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Script is one scripted answer. A command (or RunCode's code) whose text contains Match
// gets Result, or Err when it is set; the first matching script wins, and an empty Match
// matches everything. A command no script matches exits 0 with no output.
type Script struct {
	Match  string
	Result sandbox.ExecResult
	Err    error
}

// Call is one recorded Exec, RunCode or Reclaim.
type Call struct {
	Text    string        // Exec: the shell line or the POSIX-quoted argv; RunCode: the code; Reclaim: the directory as given
	Argv    []string      // Exec with an argv only
	WorkDir string        // resolved against the storage base; empty for RunCode
	Timeout time.Duration // as the caller passed it
}

// Exec records the call and answers from the scripts. It runs nothing, so the timeout never
// expires unless a script says so. An invalid command fails with
// [*sandbox.InvalidArgumentError]; a cancelled ctx with its wrapped error.
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	if err := cmd.Validate(); err != nil {
		return sandbox.ExecResult{}, err
	}
	text := cmd.Shell
	if len(cmd.Argv) > 0 {
		text = paths.QuoteArgv(cmd.Argv)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execs = append(s.execs, Call{Text: text, Argv: slices.Clone(cmd.Argv),
		WorkDir: paths.ResolveWorkDir(s.base, wd), Timeout: timeout})
	return s.answer(text)
}

// RunCode records the call and answers from the same scripts as Exec, matched against code.
func (s *Sandbox) RunCode(ctx context.Context, code string, timeout time.Duration) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("run code: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, Call{Text: code, Timeout: timeout})
	return s.answer(code)
}

// answer finds the first script matching text. Callers hold s.mu.
func (s *Sandbox) answer(text string) (sandbox.ExecResult, error) {
	for _, sc := range s.scripts {
		if !strings.Contains(text, sc.Match) {
			continue
		}
		if sc.Err != nil {
			return sandbox.ExecResult{}, sc.Err
		}
		r := sc.Result
		r.StdoutBytes, r.StderrBytes = slices.Clone(r.StdoutBytes), slices.Clone(r.StderrBytes)
		return r, nil
	}
	return sandbox.ExecResult{}, nil
}

// AddScript appends scripts after construction.
func (s *Sandbox) AddScript(scripts ...Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts = append(s.scripts, scripts...)
}

// ExecCalls returns the Exec calls so far, oldest first.
func (s *Sandbox) ExecCalls() []Call { return s.calls(&s.execs) }

// RunCodeCalls returns the RunCode calls so far, oldest first.
func (s *Sandbox) RunCodeCalls() []Call { return s.calls(&s.runs) }

// ReclaimCalls returns the Reclaim calls so far, oldest first, refused ones included.
func (s *Sandbox) ReclaimCalls() []Call { return s.calls(&s.reclaims) }

func (s *Sandbox) calls(list *[]Call) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(*list)
	for i := range out {
		out[i].Argv = slices.Clone(out[i].Argv)
	}
	return out
}
