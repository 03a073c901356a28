package hosttools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
)

// malformedProgram publishes one request of each kind the host cannot read as a call (not
// JSON, not an object, invalid UTF-8, a NaN), each followed by a good call: eight calls.
const malformedProgram = `
import os, json, time, maf_host_tools as h
calls = os.path.join(os.path.dirname(h.__file__), "host_tool_calls")
os.makedirs(calls, exist_ok=True)
def raw(body):
    ident = h._take_number()
    p = os.path.join(calls, ident + ".request.json")
    with open(p + ".part", "wb") as f:
        f.write(body)
    os.replace(p + ".part", p)
    r = os.path.join(calls, ident + ".response.json")
    while True:
        try:
            with open(r) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(0.05)
for body in (b"not json", b"[1, 2]", b'{"name": "search", "arguments": {"query": "\xff"}}',
             b'{"name": "search", "arguments": {"query": NaN}}'):
    print("refused:", raw(body).get("refusal"))
    print(h.search(query="ok")[0])
`

// TestHostToolsMalformedRequestsCounted: requests the host cannot read as calls are refused
// to the guest, and each is still a call: counted in the reply's calls and published as a
// host_tools.called event with its refusal code, in order with the good calls.
func TestHostToolsMalformedRequestsCounted(t *testing.T) {
	sb, prefix, calls := remoteToolsSandbox(t, 16)
	decl := appToolDeclaration()
	tools := []messages.APIHostTool{{Name: "search", Subject: prefix + ".search", Declaration: decl,
		Params: []messages.APIHostToolParam{{Name: "query", Required: true}}}}
	// Eight calls on the archive plane of a loaded daemon can take a minute and more: each
	// look is a freeze and a copy. The bound is generous, the assertions are not.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := sb.RunProgram(ctx, messages.APIRunProgramRequest{TimeoutMS: 300000, PollMS: 50, Tools: tools, Source: malformedProgram})
	if err != nil {
		t.Fatalf("run_program: %v", err)
	}
	out := string(res.Output)
	if res.ExitCode != 0 || strings.Count(out, "refused: Error: this host-tool request is not valid JSON") != 3 ||
		strings.Count(out, "refused: Error: a host-tool request must be a JSON object") != 1 || strings.Count(out, "found ok") != 4 {
		t.Fatalf("exit %d, output:\n%s\nwant four refusals, each followed by a value", res.ExitCode, out)
	}
	if res.Calls != 8 {
		t.Errorf("the reply counts %d calls; the guest made 8, refusals included", res.Calls)
	}
	var codes []string
	for len(codes) < 8 {
		select {
		case m := <-calls:
			var ev events.HostToolCalledEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil || ev.RunDir != res.RunDir {
				t.Fatalf("event %s %s: %v", m.Subject, m.Data, err)
			}
			codes = append(codes, ev.Tool+":"+ev.Refusal)
		case <-time.After(5 * time.Second):
			t.Fatalf("events %v, want 8: one per call the guest made", codes)
		}
	}
	if want := ":bad_request search: :bad_request search: :bad_request search: :bad_request search:"; strings.Join(codes, " ") != want {
		t.Fatalf("events %q, want %q", strings.Join(codes, " "), want)
	}
}
