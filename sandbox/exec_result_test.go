package sandbox

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"
)

// The vectors were produced by CPython's bytes.decode("utf-8", "replace"), the reference's
// decoder, which substitutes maximal subparts.
func TestDecodeReplaceMatchesMaximalSubparts(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"valid", []byte("héllo"), "héllo"},
		{"two invalid bytes", []byte("ok\xff\xfe"), "ok\uFFFD\uFFFD"},
		{"truncated three-byte", []byte("\xe2\x82"), "\uFFFD"},
		{"truncated then ascii", []byte("\xe2\x82a"), "\uFFFDa"},
		{"truncated four-byte", []byte("\xf0\x9f\x98"), "\uFFFD"},
		{"surrogate", []byte("\xed\xa0\x80"), "\uFFFD\uFFFD\uFFFD"},
		{"overlong", []byte("\xc0\xaf"), "\uFFFD\uFFFD"},
		{"above max", []byte("\xf4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"literal replacement kept", []byte("a\xef\xbf\xbdb"), "a\uFFFDb"},
		{"overlong three-byte", []byte("\xe0\x80\x80"), "\uFFFD\uFFFD\uFFFD"},
		{"nul and crlf", []byte("a\x00\r\nb"), "a\x00\r\nb"},
		{"lone continuation", []byte("\x80x"), "\uFFFDx"},
		{"truncated at end", []byte("x\xf0"), "x\uFFFD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecodeReplace(tc.in); got != tc.want {
				t.Fatalf("DecodeReplace(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExecResultViews(t *testing.T) {
	r := ExecResult{StdoutBytes: []byte("ok\xff"), StderrBytes: []byte("e\xe2\x82"), ExitCode: 7}
	if r.Stdout() != "ok\uFFFD" || r.StdoutText() != r.Stdout() {
		t.Errorf("stdout view = %q", r.Stdout())
	}
	if r.Stderr() != "e\uFFFD" || r.StderrText() != r.Stderr() {
		t.Errorf("stderr view = %q", r.Stderr())
	}
	if !bytes.Equal(r.StdoutBytes, []byte("ok\xff")) {
		t.Fatal("bytes must be untouched by the views")
	}
	tr := ExecResultFromText("naïve", "", 0)
	if !bytes.Equal(tr.StdoutBytes, []byte("na\xc3\xafve")) {
		t.Fatalf("text is encoded as UTF-8: %q", tr.StdoutBytes)
	}
}

func FuzzDecodeReplace(f *testing.F) {
	for _, s := range []string{"ok\xff\xfe", "\xe2\x82", "\xed\xa0\x80", "a"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := DecodeReplace(b)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid output for %q", b)
		}
		if utf8.Valid(b) && got != string(b) {
			t.Fatalf("valid input changed: %q", b)
		}
	})
}

func TestNotStartedResult(t *testing.T) {
	cases := []struct {
		name    string
		cause   StartFailure
		message string
		code    int
		stderr  string
	}{
		{"no program", StartNoProgram, "exec: \"x\": executable file not found in $PATH", 127, "exec: \"x\": executable file not found in $PATH\n"},
		{"work dir, CRLF", StartWorkDir, "chdir to cwd failed\r\n", 126, "chdir to cwd failed\n"},
		{"not executable", StartPermission, "permission denied", 126, "permission denied\n"},
		{"user", StartUser, "unable to find user", 126, "unable to find user\n"},
		{"no words", StartRuntime, "", 126, "the runtime could not start the process (runtime)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NotStartedResult(tc.cause, tc.message)
			if r.ExitCode != tc.code || string(r.StderrBytes) != tc.stderr || len(r.StdoutBytes) != 0 || r.NotStarted != tc.cause {
				t.Fatalf("NotStartedResult = %+v; want exit %d, stderr %q, cause %s", r, tc.code, tc.stderr, tc.cause)
			}
		})
	}
}

func TestParseStartFailure(t *testing.T) {
	for _, f := range StartFailures() {
		if got, err := ParseStartFailure(string(f)); err != nil || got != f {
			t.Fatalf("ParseStartFailure(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseStartFailure("elsewhere"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an unknown cause: %v; want an invalid argument", err)
	}
}
