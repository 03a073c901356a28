package sandbox

import (
	"strings"
	"unicode/utf8"
)

// ExecResult is what one command returned. The byte fields are authoritative: they keep NUL,
// CR/LF, invalid UTF-8 and literal U+FFFD exactly as the program wrote them. Byte counts and
// stored artifacts always use them; the text views are for display.
type ExecResult struct {
	StdoutBytes []byte
	StderrBytes []byte
	ExitCode    int
	// ProducerOwnsStderr means stderr holds the producer's diagnostics and the program's own
	// stderr was moved into stdout.
	ProducerOwnsStderr bool
	// NotStarted, when set, says the backend's runtime could not start the command's process,
	// and why: nothing ran. The result is then what docker exec answers for it (Docker
	// backend §11.1): ExitCode 127 for [StartNoProgram], 126 for any other cause, the
	// runtime's own words on StderrBytes, nothing on StdoutBytes ([NotStartedResult]). Empty
	// for a program that ran, whatever it answered: one that exits 126 or 127 itself (a
	// shell's "not found") leaves it empty.
	NotStarted StartFailure
}

// StartFailure says why a backend's runtime could not start a command's process.
type StartFailure string

// The start failures a runtime reports.
const (
	StartWorkDir    StartFailure = "work_dir"       // the working directory is missing or unusable
	StartNoProgram  StartFailure = "program"        // the program does not exist or is not on PATH
	StartPermission StartFailure = "not_executable" // the program may not be executed (a directory, no x bit)
	StartUser       StartFailure = "user"           // the user to run as is unknown to the image
	StartRuntime    StartFailure = "runtime"        // any other refusal of the runtime
)

// StartFailures lists every start failure.
func StartFailures() []StartFailure {
	return []StartFailure{StartWorkDir, StartNoProgram, StartPermission, StartUser, StartRuntime}
}

// ParseStartFailure parses a start failure's string form; an unknown one is an
// [*InvalidArgumentError].
func ParseStartFailure(s string) (StartFailure, error) {
	return parseEnum("start failure", s, StartFailures())
}

// ExitCode is the exit status a command that failed so reports: 127 when the program was not
// found, 126 when it could not be invoked, as shells and docker exec say.
func (f StartFailure) ExitCode() int {
	if f == StartNoProgram {
		return 127
	}
	return 126
}

// NotStartedResult is the result of a command whose process the runtime could not start for
// cause: exit [StartFailure.ExitCode], message (the runtime's words) as one line of stderr.
func NotStartedResult(cause StartFailure, message string) ExecResult {
	msg := strings.TrimRight(message, "\r\n")
	if msg == "" {
		msg = "the runtime could not start the process (" + string(cause) + ")"
	}
	return ExecResult{StderrBytes: []byte(msg + "\n"), ExitCode: cause.ExitCode(), NotStarted: cause}
}

// ExecResultFromText builds a result from text, encoded as UTF-8.
func ExecResultFromText(stdout, stderr string, exitCode int) ExecResult {
	return ExecResult{StdoutBytes: []byte(stdout), StderrBytes: []byte(stderr), ExitCode: exitCode}
}

// StdoutText is stdout decoded as UTF-8 with one U+FFFD per maximal ill-formed subsequence.
func (r ExecResult) StdoutText() string { return DecodeReplace(r.StdoutBytes) }

// StderrText is stderr decoded as UTF-8 with one U+FFFD per maximal ill-formed subsequence.
func (r ExecResult) StderrText() string { return DecodeReplace(r.StderrBytes) }

// Stdout is an alias of [ExecResult.StdoutText].
func (r ExecResult) Stdout() string { return r.StdoutText() }

// Stderr is an alias of [ExecResult.StderrText].
func (r ExecResult) Stderr() string { return r.StderrText() }

// DecodeReplace decodes b as UTF-8, replacing each maximal ill-formed subsequence with one
// U+FFFD (Unicode's "substitution of maximal subparts", which Python's
// decode("utf-8", "replace") follows). strings.ToValidUTF8 collapses whole runs and a plain
// utf8.DecodeRune loop splits truncated sequences; both differ from it.
func DecodeReplace(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			sb.WriteByte(c)
			i++
			continue
		}
		n, lo, hi := leadInfo(c)
		if n == 0 {
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		for k := 1; k < n; k++ {
			if j >= len(b) {
				break
			}
			l, h := byte(0x80), byte(0xBF)
			if k == 1 {
				l, h = lo, hi
			}
			if b[j] < l || b[j] > h {
				break
			}
			j++
		}
		if j-i == n {
			sb.Write(b[i:j])
		} else {
			sb.WriteRune(utf8.RuneError)
		}
		i = j
	}
	return sb.String()
}

// leadInfo returns a lead byte's sequence length and the valid range of the byte after it
// (Unicode table 3-7); n == 0 for a byte that cannot start a sequence.
func leadInfo(c byte) (n int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}
