package main

import (
	"testing"

	"github.com/mafsandbox/engine/proxy"
)

func TestMemoryLimit(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	if limit, ok := memoryLimit(unset); !ok || limit != proxy.MemoryLimit {
		t.Fatalf("without GOMEMLIMIT: %d %v, want %d", limit, ok, proxy.MemoryLimit)
	}
	set := func(k string) (string, bool) { return "32MiB", k == "GOMEMLIMIT" }
	if limit, ok := memoryLimit(set); ok {
		t.Fatalf("with GOMEMLIMIT: %d %v, want none", limit, ok)
	}
}
