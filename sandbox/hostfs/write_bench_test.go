package hostfs

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkWrite is one Write of 1 KiB into a container's root (through its storage driver:
// fuse-overlayfs on this machine's daemon) and into a host directory: over a name that
// exists, as root and as another owner, and to a fresh name each time. It reports the median
// as well as the mean.
func BenchmarkWrite(b *testing.B) {
	body := make([]byte, 1024)
	ctx := context.Background()
	croot, _ := containerRoot(b)
	droot, _ := dirRoot(b)
	for _, root := range []struct {
		name string
		r    *Root
	}{{"container", croot}, {"hostdir", droot}} {
		if err := root.r.Write(ctx, "f", "/tmp", body, Owner{}); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			owner Owner
			fresh bool
		}{{"existing", Owner{}, false}, {"existing_uid1000", Owner{UID: 1000, GID: 1000}, false}, {"new", Owner{}, true}} {
			b.Run(root.name+"/"+c.name, func(b *testing.B) {
				prefix := token()
				i := 0
				var took []time.Duration
				for b.Loop() {
					t0 := time.Now()
					name := "f"
					if c.fresh {
						i++
						name = prefix + string(rune('a'+i%26)) + token()[:8]
					}
					if err := root.r.Write(ctx, name, "/tmp", body, c.owner); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(t0))
				}
				// The median: on a loaded machine the mean is its slowest few writes.
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds()), "median-µs")
			})
		}
	}
}
