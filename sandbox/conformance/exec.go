package conformance

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// AssertExecConformance plants work/.probe-cwd and runs the EXEC probes of protocol §14.4:
// an argv runs, exit codes come back unaltered, argv elements arrive as single unaltered
// arguments, the working directory is honoured, stdout and stderr stay apart, output bytes
// come back exactly, and a command overrunning a 1 s timeout fails with a timeout error
// within [0.5 s, 4 s].
//
// Run it last, or on a sandbox of its own: the timeout probe, which runs last, lets a
// command overrun, and a backend may discard the whole sandbox to stop it.
//
// It fails with [*sandbox.InvalidArgumentError] when the subject does not declare exec, and
// with a [*sandbox.ConformanceFailure] when any probe failed. The results are returned
// whenever the probes ran.
func AssertExecConformance(ctx context.Context, s Subject) ([]Result, error) {
	return execSuite.assert(ctx, s)
}

// The bounds the timeout probe allows an error for a 1 s timeout. They are scheduling
// allowance, not precision: "roughly between half the bound and four times it".
const (
	probeTimeout        = time.Second
	probeTimeoutAtLeast = 500 * time.Millisecond
	probeTimeoutAtMost  = 4 * time.Second
)

// The stream probe's markers and the byte probe's expected output.
const (
	outMarker = "out-marker"
	errMarker = "err-marker"
	// byteScript writes NUL, CR/LF, invalid UTF-8, a literal U+FFFD and a truncated sequence
	// to stdout, and a shorter mix to stderr, through printf's octal escapes.
	byteScript = `printf 'a\000b\r\n\377\376\357\277\275\342\202z'; printf 'e\000\377\r\n' >&2`
	byteStdout = "a\x00b\r\n\xff\xfe\xef\xbf\xbd\xe2\x82z"
	byteStderr = "e\x00\xff\r\n"
	hostileArg = "a b$(echo injected)c"
)

var execSuite = suite{
	name:     "EXEC",
	requires: sandbox.Exec,
	plant:    layoutWithMarker,
	probes: []probe{
		{name: "an-argv-sequence-runs", run: probeAnArgvSequenceRuns,
			why: "the positive control: everything else here asserts a fidelity or a refusal, and a backend that ran nothing would pass them"},
		{name: "exit-code-fidelity", run: probeExitCodeFidelity,
			why: "a fix-loop reads the exit code to decide what to do next, and a backend normalising every failure to 1 erases what it says"},
		{name: "argv-is-quoted", run: probeArgvIsQuoted,
			why: "the argv form is the safe default because each element arrives as one argument; joined into a command line unquoted, an argument with spaces or $( ) is an injection"},
		{name: "working-directory-is-honoured", run: probeWorkingDirectoryIsHonoured,
			why: "a kind's paths are relative to the working directory it named; an exec ignoring it reads and writes where the caller cannot predict"},
		{name: "streams-stay-separate", run: probeStreamsStaySeparate,
			why: "stderr is the program's unless the result says the producer owns it; folding one stream into the other quietly misattributes the program's words"},
		{name: "exec-byte-fidelity", run: probeExecByteFidelity,
			why: "the byte fields are authoritative: NUL, CR/LF, invalid UTF-8 and a literal U+FFFD must come back exactly as the program wrote them"},
		{name: "a-timeout-raises-timeout-error", run: probeATimeoutRaisesTimeoutError,
			why: "a timeout error means the caller's bound expired and nothing else; one that fires early is another limit borrowing it, one that fires late ignored the bound. Last, because a backend may discard the sandbox here"},
	},
}

func probeAnArgvSequenceRuns(ctx context.Context, s Subject, _ Layout) error {
	res, err := s.Sandbox().Exec(ctx, sandbox.Argv("printf", "ok-ran"), s.WorkingDirectory(), PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return failf("printf ok-ran exited %d: %s", res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	if !bytes.Equal(res.StdoutBytes, []byte("ok-ran")) {
		return failf("printf ok-ran printed %q, not %q", res.StdoutBytes, "ok-ran")
	}
	return nil
}

func probeExitCodeFidelity(ctx context.Context, s Subject, _ Layout) error {
	// A shell string, because exit is a builtin: this is also the shell form's positive control.
	res, err := s.Sandbox().Exec(ctx, sandbox.Shell("exit 7"), s.WorkingDirectory(), PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 7 {
		return failf("exit 7 came back as exit code %d", res.ExitCode)
	}
	return nil
}

func probeArgvIsQuoted(ctx context.Context, s Subject, _ Layout) error {
	// The argument itself comes back, not a count of words: a split shows as a shorter
	// string and a substitution as its output.
	res, err := s.Sandbox().Exec(ctx, sandbox.Argv("sh", "-c", `printf '%s' "$1"`, "probe", hostileArg), s.WorkingDirectory(), PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return failf("the quoting probe exited %d: %s", res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	if !bytes.Equal(res.StdoutBytes, []byte(hostileArg)) {
		return failf("the argument %q came back as %q: it was not delivered as one unaltered argument", hostileArg, res.StdoutBytes)
	}
	return nil
}

func probeWorkingDirectoryIsHonoured(ctx context.Context, s Subject, _ Layout) error {
	wd := s.WorkingDirectory()
	res, err := s.Sandbox().Exec(ctx, sandbox.Argv("pwd"), wd, PlantTimeout)
	if err != nil {
		return err
	}
	// A logical pwd answering the named directory is as conformant as a physical one.
	if got, want := strings.TrimSpace(res.StdoutText()), paths.Normalize(wd); got != want {
		return failf("pwd answered %q against a working directory of %q", got, want)
	}
	return nil
}

func probeStreamsStaySeparate(ctx context.Context, s Subject, _ Layout) error {
	res, err := s.Sandbox().Exec(ctx, sandbox.Argv("sh", "-c", "printf %s "+outMarker+"; printf %s "+errMarker+" >&2"), s.WorkingDirectory(), PlantTimeout)
	if err != nil {
		return err
	}
	out, errOut := string(res.StdoutBytes), string(res.StderrBytes)
	if res.ProducerOwnsStderr {
		// The honest merge: the program's stderr moved into stdout, and stderr holds none of
		// the program's words.
		if strings.Contains(errOut, outMarker) || strings.Contains(errOut, errMarker) {
			return failf("the result says the producer owns stderr, yet stderr holds the program's output (%q)", errOut)
		}
		if !strings.Contains(out, outMarker) || !strings.Contains(out, errMarker) {
			return failf("the result says the program's stderr moved into stdout, yet stdout is %q", out)
		}
		return nil
	}
	if out != outMarker || errOut != errMarker {
		return failf("stdout came back as %q and stderr as %q, not %q and %q: the streams were mixed without the result saying so",
			out, errOut, outMarker, errMarker)
	}
	return nil
}

func probeExecByteFidelity(ctx context.Context, s Subject, _ Layout) error {
	res, err := s.Sandbox().Exec(ctx, sandbox.Argv("sh", "-c", byteScript), s.WorkingDirectory(), PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return failf("the byte probe exited %d: %s", res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	if res.ProducerOwnsStderr {
		// The program's stderr is in stdout by the result's own account; both must be whole.
		if !bytes.Contains(res.StdoutBytes, []byte(byteStdout)) || !bytes.Contains(res.StdoutBytes, []byte(byteStderr)) {
			return failf("stdout, holding both streams by the result's own account, came back as %q: the bytes were decoded, translated or truncated on the way", res.StdoutBytes)
		}
		return nil
	}
	if !bytes.Equal(res.StdoutBytes, []byte(byteStdout)) {
		return failf("stdout came back as %q, not %q: the bytes were decoded, translated or truncated on the way", res.StdoutBytes, byteStdout)
	}
	if !bytes.Equal(res.StderrBytes, []byte(byteStderr)) {
		return failf("stderr came back as %q, not %q: the bytes were decoded, translated or truncated on the way", res.StderrBytes, byteStderr)
	}
	return nil
}

func probeATimeoutRaisesTimeoutError(ctx context.Context, s Subject, _ Layout) error {
	started := time.Now()
	_, err := s.Sandbox().Exec(ctx, sandbox.Argv("sleep", "30"), s.WorkingDirectory(), probeTimeout)
	elapsed := time.Since(started)
	if f := refusedWith(timeout, "sleep 30 under a 1s timeout", err); f != nil {
		return f
	}
	switch {
	case elapsed < probeTimeoutAtLeast:
		return failf("the timeout error arrived after %s, under half the 1s bound: that is another limit firing, not the caller's timeout expiring", elapsed.Round(time.Millisecond))
	case elapsed > probeTimeoutAtMost:
		return failf("the timeout error arrived after %s against a 1s bound: the call was not bounded by the caller's timeout", elapsed.Round(time.Millisecond))
	}
	return nil
}
