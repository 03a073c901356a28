package dockertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/images"
)

// Main runs a package's tests; call it from TestMain. When the Docker daemon answers, it
// builds the busybox workload image first if the engine lacks it, and exits with status 1
// when that fails. When the daemon does not answer it exits with status 1 if
// [EnvRequireDocker] is "1", and otherwise runs the tests, whose Docker parts then skip.
//
// Before the tests it registers the binary as a user of the daemon, waiting while a test of
// another binary has it alone ([Alone]). After the tests it removes every container and
// network still carrying this process's [Labels], reports them on standard error, and exits
// with the tests' status.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := ServerVersion(); err != nil {
		if required() {
			fmt.Fprintf(os.Stderr, "dockertest: docker daemon does not answer and %s=1: %v\n", EnvRequireDocker, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "dockertest: docker daemon does not answer, Docker tests will skip: %v\n", err)
		return m.Run()
	}
	joinCtx, cancel := context.WithTimeout(context.Background(), shareWait)
	leave, err := join(joinCtx, usersDir(), os.Getpid(), os.Getppid())
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockertest: join the daemon's users: %v\n", err)
		return 1
	}
	defer leave()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	err = images.EnsureBusybox(ctx, dockerCLI, images.BusyboxTag)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockertest: build test image: %v\n", err)
		return 1
	}
	code := m.Run()
	sweep(os.Stderr)
	return code
}

// sweep removes the containers, then the networks (a network in use cannot go; an endpoint
// the daemon kept is disconnected by force, [RemoveNetwork]), then the images (a snapshot's
// the engine loaded), that carry this process's labels, and reports on w what it removed or failed to. Each call to the engine has its own
// timeout, so a hung daemon cannot stall the sweep.
func sweep(w io.Writer) {
	filters := []string{
		"--filter", "label=" + LabelSession + "=" + Session(),
		"--filter", "label=" + LabelProcess + "=" + Process(),
	}
	removeContainers := func(ids []string) error {
		_, err := call(append([]string{"rm", "--force", "--volumes"}, ids...))
		return err
	}
	removeNetworks := func(ids []string) error {
		var errs []error
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			errs = append(errs, RemoveNetwork(ctx, id))
			cancel()
		}
		return errors.Join(errs...)
	}
	removeImages := func(ids []string) error {
		_, err := call(append([]string{"image", "rm", "--force"}, ids...))
		return err
	}
	kinds := []struct {
		what   string
		list   []string
		remove func(ids []string) error
	}{
		{"container", []string{"ps", "--all", "--quiet", "--no-trunc"}, removeContainers},
		{"network", []string{"network", "ls", "--quiet", "--no-trunc"}, removeNetworks},
		{"image", []string{"image", "ls", "--quiet", "--no-trunc"}, removeImages}, // a snapshot's, restored by an engine that died
	}
	for _, k := range kinds {
		out, err := call(append(k.list, filters...))
		if err != nil {
			fmt.Fprintf(w, "dockertest: list leftover %ss: %v\n", k.what, err)
			continue
		}
		ids := strings.Fields(string(out))
		if len(ids) == 0 {
			continue
		}
		fmt.Fprintf(w, "dockertest: session %s leaked %d %s(s), removing: %s\n",
			Session(), len(ids), k.what, strings.Join(ids, " "))
		if err := k.remove(ids); err != nil {
			fmt.Fprintf(w, "dockertest: remove leftover %ss: %v\n", k.what, err)
		}
	}
}

// call runs one docker command under its own timeout.
func call(args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, _, err := DockerErr(ctx, args...)
	return out, err
}
