package main

import (
	"testing"

	"github.com/mafsandbox/engine/internal/depcheck"
)

// The proxy runs inside every egress container and is standard library apart from the
// decision-log grammar (package egresslog). The NATS delivery of egress events lives in
// package events so that this binary does not link the NATS client; this test keeps it so.
func TestProxyLinksNoNATS(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pkg:    "github.com/mafsandbox/engine/cmd/proxy",
		Want:   []string{"github.com/mafsandbox/engine/egresslog"},
		Forbid: []string{"github.com/nats-io", "github.com/mafsandbox/engine/events"},
		Why:    "NATS delivery belongs in package events, which the proxy must not import",
	})
}
