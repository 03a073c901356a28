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
