package actors

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors/hostfs"
	"github.com/mafsandbox/engine/sandbox"
)

// On an engine the host plane cannot use (the fake is no local daemon), auto serves file
// calls on the archive plane, and a forced host plane refuses them instead of falling back.
func TestFilePlaneChoice(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	ctx := context.Background()
	for _, tc := range []struct {
		plane   FilePlane
		archive bool
	}{{FilePlaneAuto, true}, {FilePlaneArchive, true}, {FilePlaneHost, false}} {
		t.Run(string(tc.plane), func(t *testing.T) {
			f := newFakeEngine()
			b := newTestBackend(t, f, WithFilePlane(tc.plane))
			defer b.Close(ctx)
			sb, err := b.Acquire(ctx, testKey, testSpec(t, sandbox.WithRequires()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = sb.StatFile(ctx, "a", "/tmp")
			froze := slices.Contains(f.Calls(), "pause")
			switch {
			case tc.archive && (err != nil || !froze):
				t.Fatalf("stat = %v, froze %t: want the archive plane's frozen stat", err, froze)
			case !tc.archive && (!errors.Is(err, hostfs.ErrUnavailable) || froze):
				t.Fatalf("stat = %v, froze %t: want the host plane refused, no fallback", err, froze)
			}
			if plane, _ := b.FilePlane(ctx); plane != FilePlaneArchive {
				t.Fatalf("FilePlane = %s, want archive: the host plane is never available on the fake", plane)
			}
		})
	}
	if _, err := ParseFilePlane("fuse"); err == nil {
		t.Fatal("an unknown plane was accepted")
	}
}
