package hosttools

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestHostToolsRunProgramThroughTenancy: a whole run_program as a tenant of an engine with
// tenancy, on a real server with the accounts of docs/operations.md#tenancy and the Python
// image. A's program calls its tool on maf.sandbox.tools.<A>.search: the engine's request
// crosses A's export to A's responder and the answer comes back into the program; B, with a
// subscriber on the same subject in its own account, sees none of it; A naming B's tool
// subject is refused (forbidden) before anything runs.
func TestHostToolsRunProgramThroughTenancy(t *testing.T) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	a, b := "it-ha-"+hex.EncodeToString(suffix), "it-hb-"+hex.EncodeToString(suffix)
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a, b)
	backend := itest.NewBackend(t)
	itest.ServeBackendOn(t, natstest.ConnectAs(t, srv, "engine"), backend, service.WithTenancy(nil))

	subject := service.DefaultToolPrefix + "." + a + ".search"
	ncA, ncB := natstest.ConnectAs(t, srv, a), natstest.ConnectAs(t, srv, b)
	if _, err := ncA.Subscribe(subject, func(m *nats.Msg) {
		var call messages.APIHostToolCall
		_ = json.Unmarshal(m.Data, &call)
		reply, _ := json.Marshal(messages.APIHostToolReply{Value: json.RawMessage(`"answered in A's account"`)})
		_ = m.Respond(reply)
	}); err != nil {
		t.Fatal(err)
	}
	spy, err := ncB.SubscribeSync(service.DefaultToolPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{ncA, ncB} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(itest.Context(t), ncA)
	if err != nil {
		t.Fatal(err)
	}
	agg := sandbox.HostToolAggregate{Identities: []sandbox.ToolIdentity{sandbox.IdentityApp}, MaxCallsPerRun: 4,
		ResponseLimits: sandbox.DefaultTransferLimits()}
	sb := itest.AcquireRemote(t, c, backend, sandbox.Key{Scope: a, ThreadID: "t", AgentID: "a"}, pythonHostToolsSpec(t, agg)).(*client.Sandbox)
	tool := func(subject string) []messages.APIHostTool {
		return []messages.APIHostTool{{Name: "search", Subject: subject, Declaration: appToolDeclaration(), AnyArguments: true}}
	}
	res, err := sb.RunProgram(itest.Context(t), messages.APIRunProgramRequest{TimeoutMS: 60000, PollMS: 50, Tools: tool(subject), Source: `
import maf_host_tools as h
print(h.search())
`})
	if err != nil || res.ExitCode != 0 || res.Calls != 1 || !strings.Contains(string(res.Output), "answered in A's account") {
		t.Fatalf("A's run_program with its own tool: %+v, %v\n%s", res, err, res.Output)
	}
	if m, err := spy.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("B saw a tool call on %s: %s", m.Subject, m.Data)
	}
	_, err = sb.RunProgram(itest.Context(t), messages.APIRunProgramRequest{TimeoutMS: 60000, PollMS: 50,
		Tools: tool(service.DefaultToolPrefix + "." + b + ".search"), Source: "print(1)"})
	var fe *messages.ForbiddenError
	if !errors.As(err, &fe) {
		t.Fatalf("A's run_program naming B's tool subject: %v, want forbidden", err)
	}
}
