package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// execWrapper is a broken backend built from one change to every result or command.
type execWrapper struct {
	*guest
	cmd    func(sandbox.Command) sandbox.Command
	result func(sandbox.ExecResult, error) (sandbox.ExecResult, error)
	wd     func(string) string
}

func (b execWrapper) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	if b.cmd != nil {
		cmd = b.cmd(cmd)
	}
	if b.wd != nil {
		wd = b.wd(wd)
	}
	res, err := b.guest.Exec(ctx, cmd, wd, timeout)
	if b.result != nil {
		return b.result(res, err)
	}
	return res, err
}

// isProbeCommand tells the probes' commands from the subject's own planting and looking.
func isProbeCommand(cmd sandbox.Command) bool {
	return len(cmd.Argv) == 0 || (cmd.Argv[0] != "test" && !slices.Contains(cmd.Argv, existsScript) && !slices.Contains(cmd.Argv, plantLinkScript))
}

func TestConformanceExecPassesOnTheFake(t *testing.T) {
	t.Parallel()
	g := newGuest(t)
	started := time.Now()
	results, err := AssertExecConformance(t.Context(), subjectOf(t, g, everything()))
	mustPass(t, results, err)
	if len(results) != 7 {
		t.Fatalf("%d results, want 7", len(results))
	}
	if _, ok := g.Kind(work + "/.probe-cwd"); !ok {
		t.Fatal("the suite did not plant its working directory marker")
	}
	if elapsed := time.Since(started); elapsed < time.Second {
		t.Fatalf("the suite took %s: the timeout probe cannot have waited for its bound", elapsed)
	}
}

func TestConformanceExecAcceptsAMergeTheResultDeclares(t *testing.T) {
	t.Parallel()
	merge := func(res sandbox.ExecResult, err error) (sandbox.ExecResult, error) {
		res.StdoutBytes = append(res.StdoutBytes, res.StderrBytes...)
		res.StderrBytes, res.ProducerOwnsStderr = nil, true
		return res, err
	}
	results, err := AssertExecConformance(t.Context(), subjectOf(t, execWrapper{guest: newGuest(t), result: merge}, everything()))
	mustPass(t, results, err)
}

func TestConformanceExecCatchesBrokenBackends(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		wrap execWrapper
		want []string
	}{
		{"normalises exit codes", execWrapper{result: func(res sandbox.ExecResult, err error) (sandbox.ExecResult, error) {
			if res.ExitCode > 1 {
				res.ExitCode = 1
			}
			return res, err
		}}, sorted("exit-code-fidelity")},
		{"re-splits argv", execWrapper{cmd: func(cmd sandbox.Command) sandbox.Command {
			var argv []string
			for _, a := range cmd.Argv {
				if isProbeCommand(cmd) && len(argv) >= 3 {
					argv = append(argv, strings.Fields(a)...)
					continue
				}
				argv = append(argv, a)
			}
			cmd.Argv = argv
			return cmd
		}}, sorted("argv-is-quoted")},
		{"ignores the working directory", execWrapper{wd: func(string) string { return "/" }}, sorted(
			"working-directory-is-honoured")},
		{"folds stderr quietly", execWrapper{result: func(res sandbox.ExecResult, err error) (sandbox.ExecResult, error) {
			res.StdoutBytes, res.StderrBytes = append(res.StdoutBytes, res.StderrBytes...), nil
			return res, err
		}}, sorted("streams-stay-separate", "exec-byte-fidelity")},
		{"declares a merge it did not make", execWrapper{result: func(res sandbox.ExecResult, err error) (sandbox.ExecResult, error) {
			res.ProducerOwnsStderr = true
			return res, err
		}}, sorted("streams-stay-separate", "exec-byte-fidelity")},
		{"decodes output", execWrapper{result: func(res sandbox.ExecResult, err error) (sandbox.ExecResult, error) {
			res.StdoutBytes = []byte(strings.ReplaceAll(res.StdoutText(), "\r\n", "\n"))
			return res, err
		}}, sorted("exec-byte-fidelity")},
		{"never times out", execWrapper{cmd: func(cmd sandbox.Command) sandbox.Command {
			if slices.Equal(cmd.Argv, []string{"sleep", "30"}) {
				cmd.Argv = []string{"sleep", "0"}
			}
			return cmd
		}}, sorted("a-timeout-raises-timeout-error")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.wrap.guest = newGuest(t)
			_, err := AssertExecConformance(t.Context(), subjectOf(t, tc.wrap, everything()))
			if got := failedNames(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("failed = %q\nwant     %q\n%v", got, tc.want, err)
			}
		})
	}
}

// clock answers the timeout probe's sleep with a timeout error after a set delay.
type clock struct {
	*guest
	after time.Duration
}

func (c clock) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	if slices.Equal(cmd.Argv, []string{"sleep", "30"}) {
		time.Sleep(c.after)
		return sandbox.ExecResult{}, &sandbox.TimeoutError{Op: "exec", Timeout: timeout}
	}
	return c.guest.Exec(ctx, cmd, wd, timeout)
}

// wrongError answers the timeout probe's sleep with an error of another family in time.
type wrongError struct{ *guest }

func (w wrongError) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	if slices.Equal(cmd.Argv, []string{"sleep", "30"}) {
		time.Sleep(timeout)
		return sandbox.ExecResult{}, &sandbox.ExecOutputLimitExceededError{Budget: 1}
	}
	return w.guest.Exec(ctx, cmd, wd, timeout)
}

func TestConformanceTheTimeoutProbeHoldsTheBound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		wrap func(*guest) sandbox.Sandbox
		want string // in the failure; "" = passes
	}{
		{"at the bound", func(g *guest) sandbox.Sandbox { return clock{g, time.Second} }, ""},
		{"far too early", func(g *guest) sandbox.Sandbox { return clock{g, 0} }, "under half the 1s bound"},
		{"far too late", func(g *guest) sandbox.Sandbox { return clock{g, 4500 * time.Millisecond} }, "not bounded by the caller's timeout"},
		{"another family", func(g *guest) sandbox.Sandbox { return wrongError{g} }, "not a timeout error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := subjectOf(t, tc.wrap(newGuest(t)), everything())
			r := runProbe(t.Context(), execSuite.probes[len(execSuite.probes)-1], s, Layout{Work: work, Outside: work + OutsideSuffix})
			switch {
			case tc.want == "" && !r.Passed:
				t.Fatalf("failed: %s", r.Reason)
			case tc.want != "" && (r.Passed || !strings.Contains(r.Reason, tc.want)):
				t.Fatalf("result = %+v, want a failure containing %q", r, tc.want)
			}
		})
	}
}
