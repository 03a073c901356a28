package service

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// The README's run command: the demo builds, serves on embedded NATS, plays its agent over
// the client — a closed sandbox; model-written Python that calls a host tool served by the
// agent's host on NATS; an allowlisted sandbox that reaches an allowed name and is refused a
// denied one, and an inspected host that gets a GET with a credential the sandbox never held
// and refuses a POST, its window read back from JetStream — and leaves nothing behind.
func TestDemoCommand(t *testing.T) {
	// The demo runs on the embedded defaults, whatever the pass's driver: one run is enough.
	dockertest.Busybox(t)
	dockertest.Python(t)
	bin := filepath.Join(t.TempDir(), "engine")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mafsandbox/engine/cmd/engine").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := []string{"demo"}
	for k, v := range dockertest.Labels() {
		args = append(args, "--label", k+"="+v)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("engine demo: %v\n%s", err, out)
	}
	// Both images were there before the demo began: it builds neither, and says so.
	if strings.Contains(string(out), "building the") {
		t.Errorf("the demo says it builds an image the daemon already has:\n%s", out)
	}
	for _, want := range []string{"over NATS", "hello from Linux", "refused", "loopback only", "nothing was left behind",
		"lists 0 containers", "sealed", "code=200", "Forbidden", "read back from JetStream", "durable consumer",
		"ALLOW allowed.demo.maf-sandbox.example:443", "DENY denied.demo.maf-sandbox.example:443",
		"ALLOW api.demo.maf-sandbox.example:443 GET /repos/demo/widgets status=200", "the target received the real token",
		"DENY api.demo.maf-sandbox.example:443 POST /repos/demo/widgets status=403",
		`result 2 for "otters", from the host`, "the operator console watches this engine at http://127.0.0.1:", `refused: Error: "drop_tables" is not a registered host tool`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
