package service

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/service"
)

// TestRunTenancyStreamPrefix: "engine run" as a tenant against "engine serve --tenancy" streams
// its command's output when given --stream-prefix maf.sandbox.stream.<account>, the namespace
// the engine's account exports to that tenant; without it the client streams to an inbox, and
// the engine refuses the exec (forbidden), which engine run reports with exit status 1.
func TestRunTenancyStreamPrefix(t *testing.T) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	a := "it-ra-" + hex.EncodeToString(suffix)
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a)
	itest.StartServe(t, nil, "--nats-url", srv.ClientURL(), "--nats-user", "engine", "--nats-password", natstest.Password, "--tenancy")
	bin := itest.BuildEngine(t)
	run := func(extra ...string) (code int, stdout, stderr string) {
		t.Helper()
		args := append([]string{"run", "--nats-url", srv.ClientURL(), "--nats-user", a, "--nats-password", natstest.Password,
			"--image", dockertest.Busybox(t), "--scope", a}, extra...)
		cmd := exec.CommandContext(itest.Context(t), bin, append(args, "--shell", "echo streamed-out; echo streamed-err >&2")...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("engine run: %v\n%s", err, errOut.String())
		}
		return code, out.String(), errOut.String()
	}
	code, stdout, stderr := run("--stream-prefix", service.DefaultStreamPrefix+"."+a)
	if code != 0 || stdout != "streamed-out\n" || !strings.Contains(stderr, "streamed-err\n") {
		t.Fatalf("engine run --stream-prefix as %s: exit %d\nstdout: %q\nstderr: %q", a, code, stdout, stderr)
	}
	code, stdout, stderr = run()
	if code != 1 || stdout != "" || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("engine run without --stream-prefix as %s: exit %d, want 1 and forbidden\nstdout: %q\nstderr: %q", a, code, stdout, stderr)
	}
}
