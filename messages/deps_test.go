package messages

import (
	"testing"

	"github.com/mafsandbox/engine/internal/depcheck"
)

// The client and the service share this package, the wire contract, so that neither imports
// the other: the Go client links no NATS server-side code (nats.go/micro) and no engine, and
// the contract itself links no NATS client at all and nothing of the engine but the protocol.
func TestClientAndContractLinkNoService(t *testing.T) {
	for _, r := range []depcheck.Rule{
		{Pkg: "github.com/mafsandbox/engine/client",
			Want:   []string{"github.com/mafsandbox/engine/messages", "github.com/nats-io/nats.go"},
			Forbid: []string{"github.com/mafsandbox/engine/service", "github.com/nats-io/nats.go/micro", "github.com/mafsandbox/engine/actors", "github.com/mafsandbox/engine/docker"},
			Why:    "the Go client speaks the contract in package messages and links no engine"},
		{Pkg: "github.com/mafsandbox/engine/messages",
			Want:   []string{"github.com/mafsandbox/engine/sandbox"},
			Forbid: []string{"github.com/nats-io", "github.com/mafsandbox/engine/service", "github.com/mafsandbox/engine/client", "github.com/mafsandbox/engine/actors", "github.com/mafsandbox/engine/docker"},
			Why:    "the contract is data, subjects, codes and conversions; both ends import it"},
	} {
		t.Run(r.Pkg, func(t *testing.T) { depcheck.Check(t, r) })
	}
}
