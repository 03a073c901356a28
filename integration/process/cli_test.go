package process

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/integration/internal/itest"
)

// TestEngineProcessVerbs: the engine command as a person uses it against engine serve:
// run --detach starts a process and prints its ID, ps lists it, logs prints its output
// (from a sequence too), attach feeds it stdin and exits with its code, kill signals one.
func TestEngineProcessVerbs(t *testing.T) {
	url := itest.StartServe(t, nil)
	bin := itest.BuildEngine(t)
	thread := "cli-" + strings.TrimPrefix(itest.NewKey(t).Scope, "it-")
	key := []string{"--nats-url", url, "--scope", "cli", "--thread", thread}
	engine := func(stdin string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("engine %v: %v", args, err)
		}
		if code != 0 && args[0] != "attach" {
			t.Fatalf("engine %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String(), code
	}
	t.Cleanup(func() {
		_, _ = exec.Command(bin, "run", "--nats-url", url, "--scope", "cli", "--thread", thread, "--", "true").CombinedOutput()
	})

	id, _ := engine("", append([]string{"run", "--detach", "--id", "greeter"}, append(key, "--shell", "echo hello")...)...)
	if strings.TrimSpace(id) != "greeter" {
		t.Fatalf("run --detach printed %q", id)
	}
	engine("", append([]string{"run", "--detach", "--id", "cat", "--stdin"}, append(key, "--shell", "cat; exit 5")...)...)
	engine("", append([]string{"run", "--detach", "--id", "sleeper"}, append(key, "--", "sleep", "300")...)...)

	if out, _ := engine("", append([]string{"logs", "--follow"}, append(key, "greeter")...)...); out != "hello\n" {
		t.Fatalf("logs: %q", out)
	}
	if out, _ := engine("", append([]string{"logs", "--from", "2"}, append(key, "greeter")...)...); out != "llo\n" {
		t.Fatalf("logs --from 2: %q", out)
	}
	if out, code := engine("typed in\n", append([]string{"attach", "--from", "0"}, append(key, "cat")...)...); out != "typed in\n" || code != 5 {
		t.Fatalf("attach: %q, exit %d", out, code)
	}
	engine("", append([]string{"kill", "--signal", "KILL"}, append(key, "sleeper")...)...)
	out, _ := engine("", append([]string{"ps"}, key...)...)
	for _, want := range []string{"greeter", "exited 0", "cat", "exited 5", "sleeper", "signalled (SIGKILL)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ps lacks %q:\n%s", want, out)
		}
	}
}
