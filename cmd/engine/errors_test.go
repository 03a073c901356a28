package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/natstest"
)

// runCaptured runs the engine's run function in this process with args and returns its exit
// status and everything written to stderr, both by run and by anything (the flag package)
// writing to os.Stderr directly.
func runCaptured(t *testing.T, args ...string) (int, string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = f
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	code := run(ctx, args, f)
	cancel()
	os.Stderr = saved
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}

// A flag a verb does not know prints the error and one line pointing to the verb's -h, not the
// verb's whole usage; -h still prints the usage.
func TestBadFlagPointsToHelp(t *testing.T) {
	for _, verb := range [][]string{{"serve"}, {"run"}, {"demo"}, {"bench"}, {"images", "build"}, {"reap"}, {"console"}, {"version"}} {
		name := strings.Join(verb, " ")
		t.Run(name, func(t *testing.T) {
			code, stderr := runCaptured(t, append(verb, "--no-such-flag")...)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != 1 || len(lines) != 2 {
				t.Fatalf("exit %d, %d lines on stderr, want 1 and 2:\n%s", code, len(lines), stderr)
			}
			if !strings.Contains(lines[0], "flag provided but not defined: -no-such-flag") || !strings.Contains(lines[1], `"engine `+name+` -h"`) {
				t.Fatalf("stderr %q: want the error, then a pointer to engine %s -h", stderr, name)
			}
		})
	}
	if code, stderr := runCaptured(t, "images", "--no-such-flag"); code != 1 || strings.Count(stderr, "\n") != 2 || !strings.Contains(stderr, `"engine images build -h"`) {
		t.Fatalf("images without build: exit %d, stderr %q; want the error and a pointer to -h", code, stderr)
	}
	if code, stderr := runCaptured(t, "run", "-h"); code != 0 || !strings.Contains(stderr, "Usage: engine run") || !strings.Contains(stderr, "-nats-url") {
		t.Fatalf("run -h: exit %d, printed %q; want its usage and flags", code, stderr)
	}
}

// engine run with no engine to answer says so, where it looked, and how to start one: when
// nothing listens at the URL, and when a NATS server does but no engine serves on it.
func TestRunWithoutAnEngineSaysHowToStartOne(t *testing.T) {
	code, stderr := runCaptured(t, "run", "--nats-url", "nats://127.0.0.1:1", "--", "true")
	if code != 1 || !strings.Contains(stderr, "no engine answers on nats://127.0.0.1:1: nothing listens there") ||
		!strings.Contains(stderr, "engine serve") {
		t.Fatalf("nothing listening: exit %d, stderr %q; want where it looked and how to start an engine", code, stderr)
	}
	srv := natstest.Run(t)
	url := srv.ClientURL()
	code, stderr = runCaptured(t, "run", "--nats-url", url, "--call-timeout", "2s", "--", "true")
	if code != 1 || !strings.Contains(stderr, "no engine answers on "+url+": a NATS server does, but no engine serves the prefix") ||
		!strings.Contains(stderr, `"engine serve --nats-url `+url+`"`) {
		t.Fatalf("NATS without an engine: exit %d, stderr %q; want where it looked and how to start an engine", code, stderr)
	}
}
