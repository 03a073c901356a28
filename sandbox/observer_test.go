package sandbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestCommandDigest(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	if argv0, got := sandbox.CommandDigest([]string{"echo", "a b"}, "", sandbox.FormArgv); got != sum(`["echo","a b"]`) || argv0 != "echo" {
		t.Errorf("argv digest %s, argv0 %q", got, argv0)
	}
	if argv0, got := sandbox.CommandDigest(nil, "echo a b", sandbox.FormShell); got != sum("echo a b") || argv0 != "" {
		t.Errorf("shell digest %s, argv0 %q", got, argv0)
	}
	// argv ["echo a", "b"] and ["echo", "a b"] are different commands.
	_, a := sandbox.CommandDigest([]string{"echo a", "b"}, "", sandbox.FormArgv)
	_, b := sandbox.CommandDigest([]string{"echo", "a b"}, "", sandbox.FormArgv)
	if a == b {
		t.Error("two argvs that join alike share a digest")
	}
	if argv0, _ := sandbox.CommandDigest([]string{strings.Repeat("é", 100)}, "", sandbox.FormArgv); len(argv0) > 120 || !strings.HasPrefix(strings.Repeat("é", 100), argv0) {
		t.Errorf("argv0 %q is not cut to 120 bytes on a rune boundary", argv0)
	}
}

func TestActOutcome(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, sandbox.OutcomeOK},
		{fmt.Errorf("exec: %w", &sandbox.TimeoutError{Op: "exec"}), sandbox.OutcomeTimeout},
		{&sandbox.ExecOutputLimitExceededError{}, sandbox.OutcomeOutputLimit},
		{&sandbox.NotConfinedError{Path: "../x"}, sandbox.OutcomeRefused},
	}
	for _, tc := range cases {
		if got := sandbox.ActOutcome(tc.err); got != tc.want {
			t.Errorf("ActOutcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
