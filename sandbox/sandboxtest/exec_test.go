package sandboxtest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

func TestExec(t *testing.T) {
	ctx := context.Background()
	scripts := []sandboxtest.SandboxOption{
		sandboxtest.WithStdout("printf ok-ran", "ok-ran"),
		sandboxtest.WithScript(sandboxtest.Script{Match: "exit 7", Result: sandbox.ExecResult{ExitCode: 7, StderrBytes: []byte("seven")}}),
		sandboxtest.WithExecError("sleep", &sandbox.TimeoutError{Op: "exec", Timeout: time.Second}),
		sandboxtest.WithStdout("printf", "any printf"), // after the more specific one: first match wins
	}
	cases := []struct {
		name       string
		cmd        sandbox.Command
		wd         string
		wantText   string
		wantStdout string
		wantExit   int
		wantErr    error
		wantWD     string
	}{
		{"an argv sequence runs", sandbox.Argv("printf", "ok-ran"), ".", "printf ok-ran", "ok-ran", 0, nil, work},
		{"the first match wins", sandbox.Argv("printf", "other"), ".", "printf other", "any printf", 0, nil, work},
		{"exit code fidelity", sandbox.Shell("exit 7"), ".", "exit 7", "", 7, nil, work},
		{"argv is recorded quoted", sandbox.Argv("sh", "-c", `printf '%s' "$1"`, "probe", "a b$(echo injected)c"), ".",
			`sh -c 'printf '"'"'%s'"'"' "$1"' probe 'a b$(echo injected)c'`, "any printf", 0, nil, work},
		{"a scripted error", sandbox.Argv("sleep", "30"), ".", "sleep 30", "", 0, sandbox.ErrTimeout, work},
		{"nothing matches", sandbox.Shell("true"), "sub", "true", "", 0, nil, work + "/sub"},
		{"an absolute working directory", sandbox.Shell("pwd"), "/tmp/", "pwd", "", 0, nil, "/tmp"},
		{"an invalid command", sandbox.Command{}, ".", "", "", 0, &sandbox.InvalidArgumentError{}, ""},
		{"both forms", sandbox.Command{Argv: []string{"a"}, Shell: "b"}, ".", "", "", 0, &sandbox.InvalidArgumentError{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := fixture(t, scripts...)
			res, err := sb.Exec(ctx, tc.cmd, tc.wd, 5*time.Second)
			checkErr(t, err, tc.wantErr)
			if res.StdoutText() != tc.wantStdout || res.ExitCode != tc.wantExit {
				t.Fatalf("Exec = %q exit %d, want %q exit %d", res.StdoutText(), res.ExitCode, tc.wantStdout, tc.wantExit)
			}
			calls := sb.ExecCalls()
			if tc.wantText == "" {
				if len(calls) != 0 {
					t.Fatalf("an invalid command was recorded: %+v", calls)
				}
				return
			}
			if len(calls) != 1 {
				t.Fatalf("recorded %d calls", len(calls))
			}
			c := calls[0]
			if c.Text != tc.wantText || c.WorkDir != tc.wantWD || c.Timeout != 5*time.Second || !slices.Equal(c.Argv, tc.cmd.Argv) {
				t.Fatalf("recorded %+v, want text %q in %q", c, tc.wantText, tc.wantWD)
			}
			if len(sb.RunCodeCalls()) != 0 {
				t.Fatal("an exec was recorded as run_code")
			}
		})
	}
}

func TestRunCode(t *testing.T) {
	ctx := context.Background()
	sb := fixture(t, sandboxtest.WithStdout("1 + 1", "2"))
	sb.AddScript(sandboxtest.Script{Match: "raise", Err: errBoom})
	res, err := sb.RunCode(ctx, "1 + 1", time.Second)
	if err != nil || res.StdoutText() != "2" {
		t.Fatalf("RunCode = %q, %v", res.StdoutText(), err)
	}
	_, err = sb.RunCode(ctx, "raise ValueError", time.Second)
	checkErr(t, err, errBoom)
	calls := sb.RunCodeCalls()
	if len(calls) != 2 || calls[0].Text != "1 + 1" || calls[1].Text != "raise ValueError" || calls[0].WorkDir != "" {
		t.Fatalf("recorded %+v", calls)
	}
	if len(sb.ExecCalls()) != 0 {
		t.Fatal("run_code was recorded as an exec")
	}
}

// TestScriptResultIsACopy checks that a caller mutating one result cannot change the next.
func TestScriptResultIsACopy(t *testing.T) {
	ctx := context.Background()
	sb := fixture(t, sandboxtest.WithStdout("", "same"))
	res, _ := sb.Exec(ctx, sandbox.Shell("a"), ".", time.Second)
	res.StdoutBytes[0] = 'X'
	again, _ := sb.Exec(ctx, sandbox.Shell("a"), ".", time.Second)
	if again.StdoutText() != "same" {
		t.Fatalf("the script changed: %q", again.StdoutText())
	}
	calls := sb.ExecCalls()
	calls[0].Text = "changed"
	if sb.ExecCalls()[0].Text != "a" {
		t.Fatal("the record changed through a returned slice")
	}
}
