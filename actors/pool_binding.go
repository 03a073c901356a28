package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mafsandbox/engine/actors/hostfs"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// A warm pool's member is created before its key is known, so it carries pool labels, not the
// key's (labels cannot change after create). At hand-out its binding (the key and kind it now
// serves) is written into the container and it is then renamed to the key's derived name, all
// before the acquire replies and before any caller's command has run in it: a derived name
// never stands without its binding. Everything that finds
// sandboxes by key labels — Dispose, DisposeScope, disposal by instance — also lists the pool's
// bound members and reads their binding.
//
// The name is the engine's (only the daemon's rename changes it, and a guest cannot reach the
// daemon); the file only says which key the name was derived from. A binding is believed only
// when the key and kind it names derive exactly that container's name. One that is missing,
// unreadable, not a plain file or naming another key was changed by the guest: such a sandbox
// matches every purge (fail closed), so a guest can get only its own sandbox removed, never
// escape a purge of its scope.

// bindingPath is where a bound pool member's binding lives, in its root.
const bindingPath = "/.maf-sandbox-binding"

// bindingMax bounds the binding read back: a key's four parts plus its kind.
const bindingMax = 64 * 1024

// poolBinding is the record of one hand-out. Version 1.
type poolBinding struct {
	V      int    `json:"v"`
	Scope  string `json:"scope"`
	Thread string `json:"thread"`
	Agent  string `json:"agent"`
	Call   string `json:"call,omitempty"`
	Kind   string `json:"kind"`
}

func newPoolBinding(key sandbox.Key, kind string) poolBinding {
	return poolBinding{V: 1, Scope: key.Scope, Thread: key.ThreadID, Agent: key.AgentID, Call: key.CallID, Kind: kind}
}

func (p poolBinding) key() sandbox.Key {
	return sandbox.Key{Scope: p.Scope, ThreadID: p.Thread, AgentID: p.Agent, CallID: p.Call}
}

// bindingCacheMax bounds the bindings a backend remembers (see bindings).
const bindingCacheMax = 100_000

// bindings remembers the binding of each bound name this backend wrote or believed. A
// derived name is a digest of its key and kind, so what was proven for a name holds for any
// container that carries it: a later purge needs no read of it, and a guest that rewrites the
// file afterwards changes nothing.
type bindings struct {
	mu     sync.Mutex
	byName map[string]poolBinding
}

func (c *bindings) get(name string) (poolBinding, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.byName[name]
	return p, ok
}

func (c *bindings) put(name string, p poolBinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil || len(c.byName) >= bindingCacheMax {
		c.byName = map[string]poolBinding{} // forgetting costs only a read
	}
	c.byName[name] = p
}

// writeBinding records, in the container target, that it now serves key and kind: root's,
// written while only the member's keep-alive runs in it. On the host plane it is a write
// beneath the proven process's root; else through the archive plane, which on a
// fuse-overlayfs daemon costs a mount of the container's filesystem (0.3-0.5 s here).
func (a *containerActor) writeBinding(ctx context.Context, target string, key sandbox.Key, kind string) error {
	p := newPoolBinding(key, kind)
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode binding: %w", err)
	}
	a.b.bindings.put(a.name, p)
	if a.b.filePlane != FilePlaneArchive {
		if fp, err := a.plane(ctx, target); err == nil {
			if hp, ok := fp.(hostPlane); ok {
				if err := hp.root.Write(ctx, bindingPath, "/", body, hostfs.Owner{}); err != nil {
					return fmt.Errorf("write binding of %s: %w", target, err)
				}
				return nil
			}
		}
	}
	tarball, err := docker.BuildTar(docker.FileEntry(bindingPath, body, 0o444, 0, 0))
	if err != nil {
		return fmt.Errorf("build binding: %w", err)
	}
	if err := a.b.engine.CopyIn(ctx, target, tarball); err != nil {
		return fmt.Errorf("write binding of %s: %w", target, err)
	}
	return nil
}

// readBinding reads the binding of the bound member name. ok is false when it cannot be
// believed (see above); err only when the container could not be asked at all (absent
// included: there is nothing to purge then).
func (b *Backend) readBinding(ctx context.Context, name string) (_ poolBinding, ok bool, _ error) {
	if p, ok := b.bindings.get(name); ok {
		return p, true, nil
	}
	e, body, err := b.engine.Read(ctx, name, bindingPath, bindingMax)
	switch {
	case err == nil:
	case isNotFound(err), errors.Is(err, docker.ErrUnreachable):
		return poolBinding{}, false, err
	default:
		// A missing file, a link, a size over the cap: the guest's doing.
		return poolBinding{}, false, nil
	}
	if e == nil || e.Type != docker.EntryFile {
		return poolBinding{}, false, nil
	}
	var p poolBinding
	if json.Unmarshal(body, &p) != nil || p.V != 1 || docker.ContainerName(p.key(), p.Kind, "") != name {
		return poolBinding{}, false, nil
	}
	b.bindings.put(name, p)
	return p, true, nil
}
