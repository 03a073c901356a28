package service

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// engine reap, as an operator runs it: a dry run names the expired sandbox and removes
// nothing; the real run removes it; a second run finds nothing.
func TestReapCommand(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	sb := itest.Acquire(t, b, key, itest.BusyboxSpec(t))
	bin := filepath.Join(t.TempDir(), "engine")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mafsandbox/engine/cmd/engine").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	time.Sleep(1500 * time.Millisecond) // the sandbox must be older than the cutoff below
	reap := func(args ...string) map[string]any {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"reap", "--older-than", "1s", "--scope", key.Scope, "--json"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("engine reap %v: %v\n%s", args, err, out)
		}
		var res map[string]any
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("engine reap output is not JSON: %v\n%s", err, out)
		}
		return res
	}
	reap("--dry-run")
	if got := strings.TrimSpace(dockertest.Docker(t, "ps", "-aq", "--filter", "id="+sb.InstanceID())); got == "" {
		t.Fatal("a dry run removed the sandbox")
	}
	res := reap()
	if n, _ := res["disposed"].(float64); n != 1 {
		t.Fatalf("reap result %v, want one sandbox disposed", res)
	}
	if got := strings.TrimSpace(dockertest.Docker(t, "ps", "-aq", "--filter", "id="+sb.InstanceID())); got != "" {
		t.Fatal("the expired sandbox is still there")
	}
	if n, _ := reap()["disposed"].(float64); n != 0 {
		t.Fatal("a second sweep found something to remove")
	}
}
