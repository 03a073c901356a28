package egress

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// The two heaviest tests' sizes. make test runs them at a size that still proves each one's
// property; make scale (MAF_SANDBOX_SCALE=full, the release check) runs them in full, with the
// daemon to themselves (docs/testing.md, "make scale").
const (
	// scaleSandboxes is past the ~30 networks of the daemon's default address pools, so every
	// sandbox beyond them proves the engine's own egress pool; fullSandboxes is the target.
	scaleSandboxes = 40
	fullSandboxes  = 250
	// scaleWindows gives each of the exactly-once test's four fates ten windows, half of them
	// on each side of the NATS restart; fullWindows is the cluster target.
	scaleWindows = 40
	fullWindows  = 200
)

// fullScale reports whether MAF_SANDBOX_SCALE asks for the heavy tests in full.
func fullScale(t *testing.T) bool {
	switch v := os.Getenv("MAF_SANDBOX_SCALE"); v {
	case "":
		return false
	case "full":
		return true
	default:
		t.Fatalf("MAF_SANDBOX_SCALE=%q: want full or nothing", v)
		return false
	}
}

// egressScale is how many allowlisted sandboxes TestEgressAtScale/ManyAllowlistedSandboxes holds at once.
func egressScale(t *testing.T) int {
	if fullScale(t) {
		return fullSandboxes
	}
	return scaleSandboxes
}

// TestEgressAtScale runs the package's two heaviest tests: allowlisted sandboxes held at once,
// and engines killed and NATS restarted across many windows. In full (make scale) they have
// the daemon to themselves (dockertest.Alone), one hold for both, since another package beside
// either would time out at that size; at make test's size they share it like any other test.
func TestEgressAtScale(t *testing.T) {
	if fullScale(t) {
		dockertest.Alone(t)
	}
	t.Run("EventsExactlyOnceAcrossFaults", testEgressEventsExactlyOnceAcrossFaults)
	t.Run("ManyAllowlistedSandboxes", testEgressManyAllowlistedSandboxes)
}

// 250 allowlisted sandboxes alive at once on one daemon, far past the ~30 networks of its
// default address pools: each on a subnet of the egress pool, each proved sealed, each
// reaching the allowed target through its own proxy; after dispose none of their networks or
// containers is left.
func testEgressManyAllowlistedSandboxes(t *testing.T) {
	n := egressScale(t)
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	keys := make([]sandbox.Key, n)
	for i := range keys {
		keys[i] = itest.NewKey(t)
	}
	disposeAll := func() {
		eachAtOnce(len(keys), func(i int) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if f := b.Dispose(ctx, keys[i], sandbox.DisposeOptions{}); f != nil {
				t.Errorf("dispose %s: %v", keys[i], f)
			}
		})
	}
	t.Cleanup(disposeAll)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	began := time.Now()
	sbs := make([]sandbox.Sandbox, n)
	errs := make([]error, n)
	eachAtOnce(n, func(i int) { sbs[i], errs[i] = b.Acquire(ctx, keys[i], spec) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("acquire %d of %d: %v", i+1, n, err)
		}
	}
	acquired := time.Since(began)
	if proved, broken := b.SealCounts(); proved != n || broken != 0 {
		t.Fatalf("seals: %d proved, %d broken, want %d proved", proved, broken, n)
	}
	eachAtOnce(n, func(i int) {
		res, err := sbs[i].Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", time.Minute)
		switch {
		case err != nil:
			errs[i] = err
		case strings.TrimSpace(res.Stdout()) != "code=200":
			errs[i] = fmt.Errorf("through the proxy: %s %s", res.Stdout(), res.Stderr())
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sandbox %d of %d: %v", i+1, n, err)
		}
	}
	nets := strings.Fields(dockertest.Docker(t, "network", "ls", "--quiet", "--filter", "label="+dockertest.LabelProcess+"="+dockertest.Process(), "--filter", "name=maf-sandbox-docker-"))
	if len(nets) < n {
		t.Fatalf("%d labelled networks for %d sandboxes", len(nets), n)
	}
	began = time.Now()
	disposeAll()
	if err := b.AwaitTeardowns(ctx); err != nil { // the networks go after the replies
		t.Fatal(err)
	}
	disposed := time.Since(began)
	left := strings.Fields(dockertest.Docker(t, "network", "ls", "--quiet", "--filter", "label="+dockertest.LabelProcess+"="+dockertest.Process(), "--filter", "name=maf-sandbox-docker-"))
	ctrs := strings.Fields(dockertest.Docker(t, "ps", "-aq", "--filter", "label="+dockertest.LabelProcess+"="+dockertest.Process(), "--filter", "name=maf-sandbox-docker-"))
	if len(left) != 0 || len(ctrs) != 0 {
		t.Fatalf("after dispose: %d networks and %d containers of the sandboxes are left", len(left), len(ctrs))
	}
	t.Logf("%d allowlisted sandboxes: acquired in %s, all reached the target, disposed in %s", n, acquired.Round(time.Second), disposed.Round(time.Second))
}

// eachAtOnce runs fn for 0..n-1, eight at a time, and returns when all have.
func eachAtOnce(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}
