package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// reapFixture makes labelled containers and networks with the reaper's name shapes in one
// scope of its own, and removes whatever is left when the test ends.
type reapFixture struct {
	t     *testing.T
	scope string
	image string
}

func newReapFixture(t *testing.T) *reapFixture {
	dockertest.Require(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &reapFixture{t: t, scope: "it-reap-" + hex.EncodeToString(b), image: dockertest.Busybox(t)}
}

// base returns a fresh derived base name maf-sandbox-docker-<12 hex>.
func (f *reapFixture) base() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return docker.NamePrefix + hex.EncodeToString(b)
}

// labels are the test labels plus the identity labels of scope (kind dropped when noKind).
func (f *reapFixture) labels(scope string, noKind bool, extra ...string) []string {
	args := dockertest.LabelArgs()
	args = append(args,
		"--label", label.Scope+"="+label.Value(scope),
		"--label", label.Thread+"=thread",
		"--label", label.Agent+"=agent")
	if !noKind {
		args = append(args, "--label", label.Kind+"=shell")
	}
	for _, e := range extra {
		args = append(args, "--label", e)
	}
	return args
}

// container creates (running when run is set, else created and stopped) a container named
// name and returns its ID. Its removal is registered first.
func (f *reapFixture) container(name string, run bool, labelArgs []string, extra ...string) string {
	f.t.Helper()
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, _ = dockertest.DockerErr(ctx, "rm", "--force", "--volumes", name)
	})
	verb := []string{"create"}
	if run {
		verb = []string{"run", "--detach"}
	}
	args := append(verb, "--pull", "never", "--name", name)
	args = append(args, labelArgs...)
	args = append(args, extra...)
	args = append(args, f.image, "sleep", "3600")
	return lastLine(dockertest.Docker(f.t, args...))
}

func (f *reapFixture) network(name string, labelArgs []string) string {
	f.t.Helper()
	dockertest.CleanupNetwork(f.t, name)
	args := append([]string{"network", "create"}, labelArgs...)
	return lastLine(dockertest.Docker(f.t, append(args, name)...))
}

func lastLine(s string) string {
	lines := strings.Fields(s)
	return lines[len(lines)-1]
}

// exists reports whether the container or network with this ID is still there.
func (f *reapFixture) exists(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err := dockertest.DockerErr(ctx, "inspect", "--format", "{{.Id}}", id)
	return err == nil
}

// TestReapByAge builds topologies of two ages (a second apart) and sweeps with an age between
// them: exactly what §4 says goes, everything else stays.
func TestReapByAge(t *testing.T) {
	f := newReapFixture(t)
	ours := f.labels(f.scope, false)
	proxy := f.labels(f.scope, false, label.Role+"="+label.RoleProxy)
	type res struct {
		name, id string
		gone     bool
	}
	var all []*res
	add := func(name, id string, gone bool) { all = append(all, &res{name, id, gone}) }

	// Old generation.
	g1, g2, g3, g4, g5 := f.base(), f.base(), f.base(), f.base(), f.base()
	n1 := f.network(g1+docker.NetworkSuffix, ours)
	add("old network of an old running workload", n1, true)
	add("old running workload", f.container(g1, true, ours, "--network", g1+docker.NetworkSuffix), true)
	add("old stopped proxy of an old workload", f.container(g1+docker.ProxySuffix, false, proxy), true)
	add("old orphan proxy", f.container(g2+docker.ProxySuffix, false, proxy), true)
	add("old network of an old orphan proxy", f.network(g2+docker.NetworkSuffix, ours), true)
	add("old orphan network", f.network(g3+docker.NetworkSuffix, ours), true)
	add("old network kept by its young orphan proxy", f.network(g4+docker.NetworkSuffix, ours), false)
	add("old stopped workload with a rebuilt proxy and network", f.container(g5, false, ours), true)
	add("old workload without a kind label (foreign)", f.container(f.base(), false, f.labels(f.scope, true)), false)
	add("old workload with a role label (foreign)", f.container(f.base(), false, proxy), false)
	add("old container under another prefix (foreign)", f.container("maf-sandbox-wsl-"+strings.TrimPrefix(f.base(), docker.NamePrefix), false, ours), false)
	add("old workload of another scope", f.container(f.base(), false, f.labels(f.scope+"-other", false)), false)

	time.Sleep(1200 * time.Millisecond)
	mid := time.Now()
	time.Sleep(1200 * time.Millisecond)

	// Young generation.
	add("young orphan proxy", f.container(g4+docker.ProxySuffix, false, proxy), false)
	add("young rebuilt proxy of an old workload", f.container(g5+docker.ProxySuffix, false, proxy), true)
	add("young rebuilt network of an old workload", f.network(g5+docker.NetworkSuffix, ours), true)
	g6 := f.base()
	add("young workload", f.container(g6, true, ours), false)
	add("young network of a young workload", f.network(g6+docker.NetworkSuffix, ours), false)

	b := itest.NewBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The cutoff of every sweep below is mid: the old generation is expired, the young is not.

	// The dry run decides the same and removes nothing.
	dry, err := b.Reap(ctx, time.Since(mid), reaper.WithScope(f.scope), reaper.WithDryRun())
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	would := map[string]bool{}
	for _, d := range dry.Resources {
		if d.Action == sandbox.ReapWouldRemove {
			would[d.ID] = true
		}
	}
	for _, r := range all {
		if !f.exists(r.id) {
			t.Fatalf("dry run removed %s", r.name)
		}
		if would[r.id] != r.gone {
			t.Errorf("dry run: %s would be removed = %v, want %v", r.name, would[r.id], r.gone)
		}
	}

	got, err := b.Reap(ctx, time.Since(mid), reaper.WithScope(f.scope))
	if err != nil {
		t.Fatalf("reap: %v", err)
	}
	if len(got.Failures) != 0 {
		t.Fatalf("failures %+v", got.Failures)
	}
	if got.Disposed != 2 || got.ProxiesRemoved != 3 || got.NetworksRemoved != 4 {
		t.Errorf("counts (%d, %d, %d), want (2, 3, 4)", got.Disposed, got.ProxiesRemoved, got.NetworksRemoved)
	}
	for _, r := range all {
		if exists := f.exists(r.id); exists == r.gone {
			t.Errorf("%s: exists = %v after the sweep", r.name, exists)
		}
	}

	// Each sweep recomputes from what remains: nothing more is old enough now.
	again, err := b.Reap(ctx, time.Since(mid), reaper.WithScope(f.scope))
	if err != nil || again.Disposed+again.ProxiesRemoved+again.NetworksRemoved != 0 || len(again.Failures) != 0 {
		t.Fatalf("second sweep %+v %v", again, err)
	}
}

// A network that still has a container attached that is not its group's is left in place,
// not forced: the failure is reported and the container keeps its network.
func TestReapNeverForcesANetwork(t *testing.T) {
	f := newReapFixture(t)
	ours := f.labels(f.scope, false)
	g := f.base()
	n := f.network(g+docker.NetworkSuffix, ours)
	// A stranger (not one of ours: no identity labels) attached to our old network.
	stranger := dockertest.RunContainer(t, f.image, "--network", g+docker.NetworkSuffix)
	time.Sleep(1100 * time.Millisecond)

	b := itest.NewBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := b.Reap(ctx, time.Second, reaper.WithScope(f.scope))
	if err != nil {
		t.Fatal(err)
	}
	if got.NetworksRemoved != 0 || len(got.Failures) != 1 || got.Failures[0].ResourceID != n ||
		got.Failures[0].ResourceKind != sandbox.ReapNetwork || got.Failures[0].Code != "refused" {
		t.Fatalf("result %+v", got)
	}
	if !f.exists(n) || !f.exists(stranger) {
		t.Fatal("the network or its stranger was removed")
	}
	attached := dockertest.Docker(t, "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", stranger)
	if !strings.Contains(attached, g+docker.NetworkSuffix) {
		t.Fatalf("stranger's networks %q: it was disconnected", attached)
	}
}
