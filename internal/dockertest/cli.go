package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dockerCLI is the docker client the helpers run, looked up in PATH.
const dockerCLI = "docker"

// callTimeout bounds each docker CLI call that [Docker] and the helpers make.
const callTimeout = 60 * time.Second

// Docker runs the docker CLI with args under a 60 s timeout and returns its standard output
// with surrounding white space trimmed. It calls t.Fatal when the command fails, with its
// standard error in the message. It does not use t.Context, so it also works in a t.Cleanup.
func Docker(t testing.TB, args ...string) (stdout string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, _, err := DockerErr(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// DockerErr runs the docker CLI with args until it exits or ctx ends. The error of a failed
// command names the arguments and holds its standard error; when ctx ended it also matches
// ctx.Err() with errors.Is.
func DockerErr(ctx context.Context, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, dockerCLI, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// Do not wait forever for output pipes held open by a process the CLI left behind.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("docker %s: %w: %s",
			strings.Join(args, " "), err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), errOut.Bytes(), nil
}
