package actors

import (
	"testing"

	"github.com/mafsandbox/engine/internal/depcheck"
)

// TestActorsLinksNoProxy: the engine writes the proxy program's environment and reads its
// decision log through package egresslog, which owns that contract; linking the proxy program
// itself (package proxy) would put the code that faces the sandbox into every engine.
func TestActorsLinksNoProxy(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pkg:    "github.com/mafsandbox/engine/actors",
		Want:   []string{"github.com/mafsandbox/engine/egresslog"},
		Forbid: []string{"github.com/mafsandbox/engine/proxy"},
		Why:    "the proxy program stays out of the engine; use the contract in package egresslog",
	})
}
