package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
)

// Every --output is checked before anything runs: with a NATS URL where nothing listens, a bad
// output is reported and the run never gets as far as connecting. A good one gets there.
func TestRunOutputValidated(t *testing.T) {
	bin := buildEngine(t)
	outDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(outDir, "taken.txt"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	const notConnected = "connect to NATS"
	cases := []struct {
		name    string
		outputs []string
		extra   []string
		want    string // in stderr
	}{
		{name: "absolute guest path", outputs: []string{"/etc/passwd"}, want: `starts with "/"`},
		{name: "guest path climbing out", outputs: []string{"a/../../b"}, want: `".." segment`},
		{name: "empty guest path", outputs: []string{":name.txt"}, want: "it is empty"},
		{name: "empty landing name", outputs: []string{"result.txt:"}, want: "landing name"},
		{name: "landing name climbing out", outputs: []string{"result.txt:../escape.txt"}, want: `".." segment`},
		{name: "backslash", outputs: []string{`dir\file`}, want: "backslash"},
		{name: "two outputs landing as one", outputs: []string{"a.txt:same.txt", "b.txt:SAME.txt"}, want: "would land as one file"},
		{name: "landing on an existing file", outputs: []string{"result.txt:taken.txt"}, want: "exists in --out-dir"},
		{name: "existing file with --replace", outputs: []string{"result.txt:taken.txt"}, extra: []string{"--replace"}, want: notConnected},
		{name: "good outputs", outputs: []string{"result.txt", "logs/run.log:run.log"}, want: notConnected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", "--nats-url", "nats://127.0.0.1:1", "--out-dir", outDir}
			for _, o := range tc.outputs {
				args = append(args, "--output", o)
			}
			args = append(append(args, tc.extra...), "--", "true")
			r := runEngine(t, bin, nil, args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, tc.want)
			}
			if tc.want != notConnected && strings.Contains(r.stderr, notConnected) {
				t.Fatalf("the run connected before refusing its outputs: %q", r.stderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "taken.txt")); err != nil || string(b) != "keep" {
		t.Fatalf("the existing file changed: %q, %v", b, err)
	}
}

// A command that outlives --timeout makes engine run exit 124, as timeout(1) does, and the
// sandbox is disposed all the same.
func TestRunTimeoutExits124(t *testing.T) {
	bin := buildEngine(t)
	url, _ := serveEngine(t, bin)
	scope := "cmd-run-timeout-" + dockertest.Process()
	r := runEngine(t, bin, nil, "run", "--nats-url", url, "--image", dockertest.Busybox(t), "--scope", scope,
		"--timeout", "2s", "--shell", "echo started; sleep 60")
	if r.code != exitTimeout {
		t.Fatalf("engine run exited %d, want %d\nstdout: %s\nstderr: %s", r.code, exitTimeout, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("stderr %q does not say the command timed out", r.stderr)
	}
	left := dockertest.Docker(t, "ps", "-a", "--quiet", "--filter", "label="+label.Scope+"="+label.Value(scope))
	if strings.TrimSpace(left) != "" {
		t.Fatalf("engine run left containers behind: %s", left)
	}

	// A command that ends in time keeps its own status, even 124's neighbours.
	r = runEngine(t, bin, nil, "run", "--nats-url", url, "--image", dockertest.Busybox(t), "--scope", scope,
		"--timeout", "30s", "--shell", "exit 123")
	if r.code != 123 {
		t.Fatalf("engine run exited %d, want the command's 123\nstderr: %s", r.code, r.stderr)
	}
}
