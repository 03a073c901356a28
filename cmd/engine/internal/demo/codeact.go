package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// codeactProgram is the model-written Python of the demo's codeact step: it calls the host's
// search tool while it runs and prints what came back.
const codeactProgram = `import maf_host_tools
hits = maf_host_tools.search(query="otters", limit=2)
for hit in hits:
    print("-", hit["title"])
try:
    maf_host_tools.call("drop_tables")
except maf_host_tools.HostToolError as refusal:
    print("refused:", refusal)
`

// codeactStep runs model-written Python that calls a host tool: the agent's host serves
// search as a nats micro endpoint, and the engine's run_program forwards each call to it.
func codeactStep(ctx context.Context, step func(string, ...any), remote *client.Backend, nc *nats.Conn, key sandbox.Key,
	image, dockerPath string) error {
	if image == images.PythonTag {
		if err := images.EnsurePython(ctx, dockerPath, image, images.WithBuildNotice(func() {
			step("building the Python image %s with debootstrap from apt's Debian mirror, once (nothing is pulled)", image)
		})); err != nil {
			step("skipping the codeact step: %v", err)
			return nil
		}
	}
	subject := "demo.tools." + key.ThreadID + ".search"
	svc, err := micro.AddService(nc, micro.Config{Name: "demo-tools", Version: "0.1.0", Description: "the demo agent's host tools",
		Endpoint: &micro.EndpointConfig{Subject: subject, Handler: micro.HandlerFunc(func(r micro.Request) {
			var call messages.APIHostToolCall
			var args struct {
				Query string `json:"query"`
				Limit int    `json:"limit"`
			}
			if json.Unmarshal(r.Data(), &call) != nil || json.Unmarshal(call.Arguments, &args) != nil {
				_ = r.Error("400", "not a host_tool_call", nil)
				return
			}
			var hits []map[string]string
			for i := range max(args.Limit, 1) {
				hits = append(hits, map[string]string{"title": fmt.Sprintf("result %d for %q, from the host", i+1, args.Query)})
			}
			v, _ := json.Marshal(hits)
			_ = r.RespondJSON(messages.APIHostToolReply{Value: v})
		})}})
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	step("the agent's host serves the tool search as a nats micro endpoint on %s", subject)

	ckey := key
	ckey.AgentID = "codeact"
	spec, err := sandbox.NewSpec("codeact-python", sandbox.WithImage(image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.HostTools),
		sandbox.WithHostTools(sandbox.HostToolAggregate{Identities: []sandbox.ToolIdentity{sandbox.IdentityApp}, MaxCallsPerRun: 4,
			ResponseLimits: sandbox.TransferLimits{MaxBytesPerFile: 64 << 10, MaxTotalBytes: 256 << 10, MaxFiles: 4}}))
	if err != nil {
		return err
	}
	sb, err := remote.Acquire(ctx, ckey, spec)
	if err != nil {
		return err
	}
	defer remote.Dispose(context.WithoutCancel(ctx), ckey, sandbox.DisposeOptions{})
	decl := map[string]json.RawMessage{"source": json.RawMessage(`"untrusted"`), "sink": json.RawMessage(`null`), "identity": json.RawMessage(`"app"`)}
	start := time.Now()
	res, err := sb.(*client.Sandbox).RunProgram(ctx, messages.APIRunProgramRequest{Source: codeactProgram, TimeoutMS: 60000,
		Tools: []messages.APIHostTool{{Name: "search", Subject: subject, Declaration: decl,
			Params: []messages.APIHostToolParam{{Name: "query", Required: true}, {Name: "limit"}}}}})
	if err != nil {
		return err
	}
	step("ran model-written Python that calls a host tool (run_program, %d calls, exit %d, %s):\n%s\n%s",
		res.Calls, res.ExitCode, time.Since(start).Round(time.Millisecond), indent(strings.TrimSpace(codeactProgram)), indent(string(res.Output)))
	return nil
}
