package hostfs

import (
	"context"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// BenchmarkDurability is what a power-loss-proof write would add: the named write's steps
// (create, write, rename over an existing name) alone and with an fsync of the file before the
// rename and of the directory after it, which Write does not make (docs/architecture.md).
func BenchmarkDurability(b *testing.B) {
	body := make([]byte, 1024)
	croot, _ := containerRoot(b)
	droot, _ := dirRoot(b)
	for _, root := range []struct {
		name string
		r    *Root
	}{{"container", croot}, {"hostdir", droot}} {
		if err := root.r.Write(context.Background(), "f", "/tmp", body, Owner{}); err != nil {
			b.Fatal(err)
		}
		for _, durable := range []bool{false, true} {
			b.Run(root.name+map[bool]string{false: "/rename", true: "/fsync_rename_fsync"}[durable], func(b *testing.B) {
				c, err := root.r.begin("f", "/tmp")
				if err != nil {
					b.Fatal(err)
				}
				defer c.close()
				pfd, err := c.dir("/tmp")
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Close(pfd)
				var took []time.Duration
				for b.Loop() {
					t0 := time.Now()
					tmp := stagingPrefix + token()
					fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					_, err = unix.Write(fd, body)
					if err == nil && durable {
						err = unix.Fsync(fd)
					}
					_ = unix.Close(fd)
					if err == nil {
						err = unix.Renameat(pfd, tmp, pfd, "f")
					}
					if err == nil && durable {
						// fsync needs a real descriptor on the directory, not the O_PATH one.
						var dfd int
						if dfd, err = unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
							err = unix.Fsync(dfd)
							_ = unix.Close(dfd)
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(t0))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds()), "median-µs")
			})
		}
	}
}
