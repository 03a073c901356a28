package events

import (
	"testing"

	"github.com/mafsandbox/engine/internal/depcheck"
)

// The events implement the observer seam over the protocol's acts: they know nothing of the
// engine that reports them, nor of the API in front of it. What they ask of the daemon, the
// backend answers (Daemon).
func TestEventsLinkNoEngine(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{Pkg: "github.com/mafsandbox/engine/events",
		Want: []string{"github.com/mafsandbox/engine/sandbox", "github.com/nats-io/nats.go"},
		Forbid: []string{"github.com/mafsandbox/engine/docker", "github.com/mafsandbox/engine/reaper",
			"github.com/mafsandbox/engine/service", "github.com/mafsandbox/engine/actors"},
		Why: "events map sandbox acts to events; a daemon's answer comes through events.Daemon, a sweep as sandbox.ReapResult"})
}
