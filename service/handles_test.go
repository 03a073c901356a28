package service

import (
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// A buried handle leaves the count and is remembered as gone under its key; the memory of
// buried handles is bounded, oldest first.
func TestBuriedHandles(t *testing.T) {
	hs := newHandles()
	key := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	spec, err := sandbox.NewSpec("k")
	if err != nil {
		t.Fatal(err)
	}
	put := func() *handle {
		sb, err := sandboxtest.NewSandbox()
		if err != nil {
			t.Fatal(err)
		}
		return hs.put(key, spec, sb, "")
	}
	first := put()
	if ids := hs.bury(first.id); len(ids) != 1 || ids[0] != first.id {
		t.Fatalf("bury = %v, want [%s]", ids, first.id)
	}
	if hs.len() != 0 || hs.get(first.id) != nil {
		t.Fatalf("a buried handle is still held (%d)", hs.len())
	}
	b, ok := hs.buriedHandle(first.id)
	if !ok || b.key != key || b.instance != first.instanceID() {
		t.Fatalf("buried = %+v, %v; want key %v and instance %s", b, ok, key, first.instanceID())
	}
	if ids := hs.bury(first.id); ids != nil {
		t.Fatalf("burying twice = %v, want nothing", ids)
	}
	for i := range maxBuried {
		hs.bury(put().id)
		if i == 0 {
			if _, ok := hs.buriedHandle(first.id); !ok {
				t.Fatalf("forgotten after %d burials", i+1)
			}
		}
	}
	if _, ok := hs.buriedHandle(first.id); ok {
		t.Fatalf("the oldest of %d burials is still remembered", maxBuried+1)
	}
	if len(hs.buried) != maxBuried || len(hs.order) != maxBuried {
		t.Fatalf("remembers %d (%d in order), want %d", len(hs.buried), len(hs.order), maxBuried)
	}
}
