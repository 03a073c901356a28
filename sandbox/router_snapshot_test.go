package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// keeper is a fake backend that keeps snapshots: it records what it was asked.
type keeper struct {
	*sandboxtest.Backend
	restored []sandbox.Key
	forked   [][]sandbox.Key
}

func (k *keeper) Restore(ctx context.Context, key sandbox.Key, spec sandbox.Spec, _ string) (sandbox.Sandbox, error) {
	k.restored = append(k.restored, key)
	return k.Acquire(ctx, key, spec)
}

func (k *keeper) Fork(ctx context.Context, _ string, keys []sandbox.Key, spec sandbox.Spec) ([]sandbox.Sandbox, error) {
	k.forked = append(k.forked, keys)
	var out []sandbox.Sandbox
	for _, key := range keys {
		sb, err := k.Acquire(ctx, key, spec)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, nil
}

func (k *keeper) DescribeSnapshot(context.Context, string) (sandbox.SnapshotInfo, error) {
	return sandbox.SnapshotInfo{}, nil
}
func (k *keeper) Snapshots(context.Context, string, string) ([]sandbox.SnapshotInfo, error) {
	return nil, nil
}
func (k *keeper) DeleteSnapshot(context.Context, string) error { return nil }

const snapID = "0123456789abcdef0123456789abcdef"

// Restore and fork are admitted as an acquire is, with snapshot_files (and fork) required
// besides: a backend that does not declare them is refused, as is a host that denies them,
// and bad arguments are refused before the backend is asked.
func TestRouterRestoreAndFork(t *testing.T) {
	ctx := context.Background()
	spec := specOf(t, "shell")
	other := convKey
	other.AgentID = "other"
	declaring := func() *keeper {
		return &keeper{Backend: mustFake(t, sandboxtest.WithIsolation(sandbox.IsolationContainer),
			sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesIn, sandbox.SnapshotFiles, sandbox.Fork))}
	}
	cases := []struct {
		name    string
		caps    []sandbox.Capability // declared, when not the keeper's
		opts    []sandbox.RouterOption
		restore bool
		id      string
		keys    []sandbox.Key
		wantErr any
	}{
		{name: "restore", restore: true, id: snapID},
		{name: "fork", id: snapID, keys: []sandbox.Key{convKey, other}},
		{name: "restore undeclared", caps: []sandbox.Capability{sandbox.Exec, sandbox.FilesIn}, restore: true, id: snapID,
			wantErr: new(*sandbox.CapabilityNotSupportedError)},
		{name: "fork without fork", caps: []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.SnapshotFiles}, id: snapID,
			keys: []sandbox.Key{convKey}, wantErr: new(*sandbox.CapabilityNotSupportedError)},
		{name: "fork denied", opts: []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.Fork)}, id: snapID,
			keys: []sandbox.Key{convKey}, wantErr: new(*sandbox.CapabilityDeniedError)},
		{name: "not an ID", restore: true, id: "../etc/passwd", wantErr: new(*sandbox.InvalidArgumentError)},
		{name: "a key twice", id: snapID, keys: []sandbox.Key{convKey, convKey}, wantErr: new(*sandbox.InvalidArgumentError)},
		{name: "no keys", id: snapID, wantErr: new(*sandbox.InvalidArgumentError)},
		{name: "a call key on a conversation spec", id: snapID, keys: []sandbox.Key{callKey}, wantErr: new(*sandbox.InvalidArgumentError)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := declaring()
			if tc.caps != nil {
				k.Backend = mustFake(t, sandboxtest.WithIsolation(sandbox.IsolationContainer), sandboxtest.WithCapabilities(tc.caps...))
			}
			r := mustRouter(t, []sandbox.Backend{k}, append([]sandbox.RouterOption{sandbox.WithMinIsolation(sandbox.IsolationContainer)}, tc.opts...)...)
			var err error
			if tc.restore {
				_, err = r.Restore(ctx, convKey, spec, tc.id)
			} else {
				_, err = r.Fork(ctx, tc.id, tc.keys, spec)
			}
			if tc.wantErr == nil {
				if err != nil || len(k.restored)+len(k.forked) != 1 {
					t.Fatalf("err %v, restored %v, forked %v", err, k.restored, k.forked)
				}
				return
			}
			if !errors.As(err, tc.wantErr) {
				t.Fatalf("err = %v, want %T", err, tc.wantErr)
			}
			if len(k.restored)+len(k.forked) != 0 {
				t.Fatal("the backend was asked although the router refused")
			}
		})
	}
}
