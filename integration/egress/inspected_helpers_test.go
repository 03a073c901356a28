package egress

import (
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// inspected is one allowlisted sandbox of the client image whose entries ask for inspection,
// acquired on a backend that verifies the fixture's target and records its windows.
type inspected struct {
	fx   *egressFixture
	b    *actors.Backend
	sink *recordingSink
	key  sandbox.Key
	name string // the workload's container name, for leftovers
	spec sandbox.Spec
	sb   sandbox.Sandbox
}

// acquireInspected starts the fixture and the backend and acquires a sandbox allowed rules.
func acquireInspected(t *testing.T, rules ...sandbox.EgressRule) *inspected {
	t.Helper()
	w := &inspected{fx: newEgressFixture(t), sink: &recordingSink{}, key: itest.NewKey(t)}
	w.b = egressBackend(t, w.fx.network, actors.WithObserver(w.sink), actors.WithEgressUpstreamCAs(w.fx.caPEM))
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(images.ClientTag), sandbox.WithAllowlist(rules...))
	if err != nil {
		t.Fatal(err)
	}
	w.spec = spec
	w.name = docker.ContainerName(w.key, spec.Kind, docker.EgressID(images.ProxyTag, sandbox.EgressIdentities(spec.EgressAllow)))
	w.sb = itest.Acquire(t, w.b, w.key, spec)
	return w
}

// run executes argv in the sandbox and returns its standard output, trimmed; an exec that
// fails fails the test.
func (w *inspected) run(t *testing.T, argv ...string) string {
	t.Helper()
	res, err := w.sb.Exec(itest.Context(t), sandbox.Argv(argv...), "/", time.Minute)
	if err != nil {
		t.Fatalf("exec %v: %v", argv, err)
	}
	return strings.TrimSpace(string(res.StdoutBytes))
}
