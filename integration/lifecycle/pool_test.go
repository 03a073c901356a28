package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// poolCaseLabel marks the containers of one pool test, so its listings and its reap see
// nothing else on the shared daemon.
const poolCaseLabel = "maf-test.pool-case"

// poolCase is one warm pool test: its own label, the busybox image, and the backends it built.
type poolCase struct {
	t     *testing.T
	id    string
	image string
}

func newPoolCase(t *testing.T) *poolCase {
	dockertest.Require(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	c := &poolCase{t: t, id: hex.EncodeToString(b), image: dockertest.Busybox(t)}
	t.Cleanup(func() { // whatever a failed test left under this case's label
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, _, _ := dockertest.DockerErr(ctx, "ps", "-aq", "--filter", "label="+poolCaseLabel+"="+c.id)
		for _, id := range strings.Fields(string(out)) {
			_, _, _ = dockertest.DockerErr(ctx, "rm", "--force", id)
		}
	})
	return c
}

func (c *poolCase) labels() map[string]string {
	l := dockertest.Labels()
	l[poolCaseLabel] = c.id
	return l
}

// backend builds a backend whose containers carry the case's label, closed when the test ends.
func (c *poolCase) backend(opts ...actors.Option) *actors.Backend {
	c.t.Helper()
	cfg := docker.Config{Labels: c.labels(), CommandTimeout: 30 * time.Second}
	opts = append([]actors.Option{actors.WithLogger(zaptest.NewLogger(c.t))}, opts...)
	b, err := actors.Create(context.Background(), cfg, opts...)
	if err != nil {
		c.t.Fatalf("create backend: %v", err)
	}
	c.t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// pooled builds a backend with a warm pool of n busybox sandboxes and waits until it is full.
func (c *poolCase) pooled(n int) *actors.Backend {
	b := c.backend(actors.WithWarmPool(c.image, n))
	c.waitSpares(b, n)
	return b
}

// waitSpares waits (a condition, not a timing: the bound only ends a hung test) until b's
// pool holds n waiting members.
func (c *poolCase) waitSpares(b *actors.Backend, n int) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for b.WarmPoolSpares()[c.image] != n {
		if time.Now().After(deadline) {
			c.t.Fatalf("the pool never held %d members: %v", n, b.WarmPoolSpares())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// names lists the case's containers by name (running or not).
func (c *poolCase) names() []string {
	out := dockertest.Docker(c.t, "ps", "-a", "--format", "{{.Names}}", "--filter", "label="+poolCaseLabel+"="+c.id)
	return strings.Fields(out)
}

func (c *poolCase) spec() sandbox.Spec {
	s, err := sandbox.NewSpec("shell", sandbox.WithImage(c.image))
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// inspect returns the container's labels, or nil when it is absent.
func (c *poolCase) inspectLabels(name string) map[string]string {
	ctx := itest.Context(c.t)
	out, _, err := dockertest.DockerErr(ctx, "inspect", "--format", "{{json .Config.Labels}}", name)
	if err != nil {
		return nil
	}
	got := map[string]string{}
	for _, kv := range strings.Split(strings.Trim(strings.TrimSpace(string(out)), "{}"), ",") {
		k, v, _ := strings.Cut(kv, ":")
		got[strings.Trim(k, `"`)] = strings.Trim(v, `"`)
	}
	return got
}

// TestWarmPoolHandsOutAndReuses: an acquire of a new key takes a waiting member, renamed to
// the key's derived name, carrying pool labels and not the key's; it runs commands; a second
// acquire of the key reuses it; the pool refills; Close removes the members still waiting.
func TestWarmPoolHandsOutAndReuses(t *testing.T) {
	c := newPoolCase(t)
	b := c.pooled(2)
	members := c.names()
	key := itest.NewKey(t)
	spec := c.spec()
	sb, err := b.Acquire(itest.Context(t), key, spec) // the case's cleanup removes it
	if err != nil {
		t.Fatal(err)
	}
	name := docker.ContainerName(key, spec.Kind, "")
	if o := outcome(sb); o != sandbox.OutcomeCreated {
		t.Fatalf("outcome %q, want created", o)
	}
	labels := c.inspectLabels(name)
	if labels == nil {
		t.Fatalf("no container named %s: %v", name, c.names())
	}
	if _, ok := labels[label.Pool]; !ok || labels[label.Scope] != "" {
		t.Fatalf("labels %v: want the pool label and no key label", labels)
	}
	was := false
	for _, m := range members {
		was = was || strings.HasPrefix(m, docker.PoolNamePrefix)
	}
	if !was {
		t.Fatalf("no pool member before the acquire: %v", members)
	}
	if got := itest.Sh(t, sb, "echo pooled"); got != "pooled\n" {
		t.Fatalf("exec answered %q", got)
	}
	again, err := b.Acquire(itest.Context(t), key, spec)
	if err != nil {
		t.Fatal(err)
	}
	if again.InstanceID() != sb.InstanceID() || outcome(again) != sandbox.OutcomeReused {
		t.Fatalf("second acquire: %s %q, want %s reused", again.InstanceID(), outcome(again), sb.InstanceID())
	}
	c.waitSpares(b, 2) // refilled
	b.Close(context.Background())
	for _, n := range c.names() {
		if docker.IsPoolName(n) {
			t.Fatalf("a waiting member outlived Close: %v", c.names())
		}
	}
}

// TestWarmPoolPurgedByAnotherBackend: a pooled sandbox carries no key label, yet
// dispose_scope and dispose by key of a backend that never saw it (no in-process record)
// remove it, through its binding; another scope's purge leaves it.
func TestWarmPoolPurgedByAnotherBackend(t *testing.T) {
	c := newPoolCase(t)
	b := c.pooled(2)
	other := c.backend()
	for _, how := range []string{"scope", "key"} {
		t.Run(how, func(t *testing.T) {
			key := itest.NewKey(t)
			spec := c.spec()
			itest.Acquire(t, b, key, spec)
			name := docker.ContainerName(key, spec.Kind, "")
			ctx := itest.Context(t)
			if p := other.DisposeScope(ctx, key.Scope+"-other", key.ThreadID); p.Disposed != 0 || c.inspectLabels(name) == nil {
				t.Fatalf("another scope's purge: %+v, container there: %v", p, c.inspectLabels(name) != nil)
			}
			switch how {
			case "scope":
				p := other.DisposeScope(ctx, key.Scope, key.ThreadID)
				if p.Disposed != 1 || p.Undisposed != nil {
					t.Fatalf("dispose_scope: %+v", p)
				}
			case "key":
				if f := other.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
					t.Fatalf("dispose: %v", f)
				}
			}
			if c.inspectLabels(name) != nil {
				t.Fatalf("%s survived the purge", name)
			}
		})
	}
}

// TestWarmPoolTamperedBindingIsPurged: a guest that rewrites its binding to name another
// key cannot escape its scope's purge: a binding that does not derive the container's name
// is not believed, and the sandbox goes with every purge.
func TestWarmPoolTamperedBindingIsPurged(t *testing.T) {
	c := newPoolCase(t)
	b := c.pooled(1)
	other := c.backend()
	key := itest.NewKey(t)
	spec := c.spec()
	sb := itest.Acquire(t, b, key, spec)
	itest.Sh(t, sb, `echo '{"v":1,"scope":"elsewhere","thread":"t","agent":"a","kind":"shell"}' > /.maf-sandbox-binding.new && mv -f /.maf-sandbox-binding.new /.maf-sandbox-binding && cat /.maf-sandbox-binding`)
	name := docker.ContainerName(key, spec.Kind, "")
	p := other.DisposeScope(itest.Context(t), key.Scope, key.ThreadID)
	if p.Disposed != 1 || c.inspectLabels(name) != nil {
		t.Fatalf("the tampered sandbox escaped its scope's purge: %+v", p)
	}
}

// caseInventory is the real driver's inventory restricted to one pool case's label, so an
// unscoped reap of the shared daemon sees only what the test made.
type caseInventory struct {
	docker.Driver
	label, value string
}

func (i caseInventory) ListContainerIDs(ctx context.Context, f map[string]string) ([]string, error) {
	f = maps.Clone(f)
	f[i.label] = i.value
	return i.Driver.ListContainerIDs(ctx, f)
}

func (i caseInventory) ListNetworkIDs(ctx context.Context, f map[string]string) ([]string, error) {
	f = maps.Clone(f)
	f[i.label] = i.value
	return i.Driver.ListNetworkIDs(ctx, f)
}

// TestWarmPoolReaped: the reaper sweeps pooled sandboxes by age, bound and waiting alike,
// though they carry no identity labels.
func TestWarmPoolReaped(t *testing.T) {
	c := newPoolCase(t)
	b := c.pooled(1)
	key := itest.NewKey(t)
	spec := c.spec()
	itest.Acquire(t, b, key, spec)
	c.waitSpares(b, 1)
	name := docker.ContainerName(key, spec.Kind, "")
	drv, err := docker.NewEngine(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := reaper.Reap(itest.Context(t), caseInventory{drv, poolCaseLabel, c.id}, time.Nanosecond)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("reap: %v %+v", err, res.Failures)
	}
	if res.Disposed != 2 || c.inspectLabels(name) != nil {
		t.Fatalf("reap removed %d (want the bound and the waiting one); left %v", res.Disposed, c.names())
	}
}

// TestWarmPoolAdoptedByFreshBackend: a second backend adopts the members the first left
// waiting and hands them out, and finds the first's pooled sandbox by its name: the key's
// next acquire reuses it.
func TestWarmPoolAdoptedByFreshBackend(t *testing.T) {
	c := newPoolCase(t)
	first := c.pooled(2)
	key := itest.NewKey(t)
	spec := c.spec()
	sb := itest.Acquire(t, first, key, spec)
	itest.Sh(t, sb, "echo kept > /tmp/mark")
	c.waitSpares(first, 2)
	waiting := map[string]bool{}
	for _, n := range c.names() {
		if docker.IsPoolName(n) {
			waiting[strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.Id}}", n))] = true
		}
	}
	second := c.backend(actors.WithWarmPool(c.image, 2))
	c.waitSpares(second, 2)
	again := itest.Acquire(t, second, key, spec)
	if again.InstanceID() != sb.InstanceID() || itest.Sh(t, again, "cat /tmp/mark") != "kept\n" {
		t.Fatalf("the fresh backend did not reuse the pooled sandbox: %s vs %s", again.InstanceID(), sb.InstanceID())
	}
	fresh := itest.Acquire(t, second, itest.NewKey(t), spec)
	if !waiting[fresh.InstanceID()] {
		t.Fatalf("the fresh backend's hand-out %s is not an adopted member %v", fresh.InstanceID(), waiting)
	}
}

// TestWarmPoolConcurrentAcquiresOneContainer: concurrent acquires of one new key get one
// container, taken from the pool once.
func TestWarmPoolConcurrentAcquiresOneContainer(t *testing.T) {
	c := newPoolCase(t)
	b := c.pooled(3)
	key := itest.NewKey(t)
	spec := c.spec()
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := b.Acquire(itest.Context(t), key, spec)
			if err != nil {
				t.Errorf("acquire: %v", err)
				return
			}
			ids[i] = sb.InstanceID()
		}()
	}
	wg.Wait()
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent acquires got different instances: %v", ids)
		}
	}
	bound := 0
	for _, n := range c.names() {
		if !docker.IsPoolName(n) {
			bound++
		}
	}
	if bound != 1 {
		t.Fatalf("%d bound containers, want 1: %v", bound, c.names())
	}
}

func outcome(sb sandbox.Sandbox) string {
	if a, ok := sb.(sandbox.Acquired); ok {
		return a.AcquireOutcome()
	}
	return ""
}

// TestWarmPoolLeavesAnotherEnginesMembers: two engines on one daemon pool the same image under
// different configuration labels; the one that starts later adopts none of the other's
// waiting members (adoption cannot tell a live engine's from a dead one's, so it takes only
// its own labels'), and both pools stay whole.
func TestWarmPoolLeavesAnotherEnginesMembers(t *testing.T) {
	first := newPoolCase(t)
	a := first.pooled(2)
	before := first.names()
	other := newPoolCase(t)
	other.pooled(1)
	if got := first.names(); !slices.Equal(got, before) || len(got) != 2 {
		t.Fatalf("the first engine's members were %v and are %v after the second's start", before, got)
	}
	if n := a.WarmPoolSpares()[first.image]; n != 2 {
		t.Fatalf("the first engine's pool holds %d, want 2", n)
	}
	if mine := other.names(); len(mine) != 1 || slices.Contains(before, mine[0]) {
		t.Fatalf("the second engine's pool is %v, the first's %v: want one member of its own", mine, before)
	}
}

// TestWarmPoolHandOutSurvivesConcurrentPurges: while members are handed out, another
// backend on the daemon sweeps an unrelated conversation without pause. A purge reads the
// binding of every bound member it lists; a member renamed to its key's name before its
// binding was written would read as tampered and be purged by a stranger's sweep. Every
// hand-out must survive the sweeps and keep running commands.
func TestWarmPoolHandOutSurvivesConcurrentPurges(t *testing.T) {
	c := newPoolCase(t)
	b := c.pooled(3)
	other := c.backend()
	ctx, stop := context.WithCancel(itest.Context(t))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if p := other.DisposeScope(ctx, "unrelated-"+c.id, "t"); p.Disposed != 0 && ctx.Err() == nil {
				t.Errorf("an unrelated conversation's purge removed %d sandboxes", p.Disposed)
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()
	spec := c.spec()
	for range 6 {
		key := itest.NewKey(t)
		sb := itest.Acquire(t, b, key, spec)
		c.waitSpares(b, 3)
		name := docker.ContainerName(key, spec.Kind, "")
		if c.inspectLabels(name) == nil {
			t.Fatalf("%s, handed out while an unrelated conversation was purged, is gone", name)
		}
		if got := itest.Sh(t, sb, "echo alive"); got != "alive\n" {
			t.Fatalf("the handed-out sandbox answered %q", got)
		}
	}
}
