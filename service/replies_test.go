package service_test

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// TestBadBodiesNameTheFieldAndTheRule sends bodies a newcomer with the nats CLI writes and
// checks that each reply names the field and the rule in the API's terms (never a Go type)
// and carries the field in error.field.
func TestBadBodiesNameTheFieldAndTheRule(t *testing.T) {
	e := startEngine(t, newFake(t))
	c := newClient(t, e)
	sb, err := c.Acquire(ctxT(t), testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	handle := sb.(*client.Sandbox).Handle()
	exec := messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, e.svc.EngineID())
	env := `"type":"` + messages.APIExecRequestType + `","key":{"scope":"tenant","thread_id":"thread","agent_id":"agent"},"sandbox":"` + handle + `"`
	on := func(subject, typ string) (string, string) {
		return messages.Engine(subject, messages.DefaultPrefix, e.svc.EngineID()),
			`"type":"` + typ + `","key":{"scope":"tenant","thread_id":"thread","agent_id":"agent"},"sandbox":"` + handle + `"`
	}
	runCode, runCodeEnv := on(messages.SubjectRunCodeT, messages.APIRunCodeRequestType)
	reclaim, reclaimEnv := on(messages.SubjectReclaimT, messages.APIReclaimRequestType)
	reset, resetEnv := on(messages.SubjectResetT, messages.APIResetRequestType)
	cases := []struct {
		name      string
		subject   string
		body      string
		wantField string
		wantText  []string
	}{
		{"an array", exec, `[1,2]`, "", []string{"must be a JSON object, not an array"}},
		{"a string", exec, `"hello"`, "", []string{"must be a JSON object, not a string"}},
		{"truncated", exec, `{"type":`, "", []string{"malformed JSON"}},
		{"a syntax error", exec, `{"type" 1}`, "", []string{"malformed JSON at byte"}},
		{"empty body", exec, ``, "", []string{"empty"}},
		{"timeout as a string", exec, `{` + env + `,"argv":["true"],"work_dir":".","timeout_ms":"5s"}`, "timeout_ms", []string{"field timeout_ms must be an integer, not a string"}},
		{"timeout as a fraction", exec, `{` + env + `,"argv":["true"],"work_dir":".","timeout_ms":1.5}`, "timeout_ms", []string{"field timeout_ms must be an integer, not the number 1.5"}},
		{"timeout missing", exec, `{` + env + `,"argv":["true"],"work_dir":"."}`, "timeout_ms", []string{"field timeout_ms is required", "positive number of milliseconds"}},
		{"timeout negative", exec, `{` + env + `,"argv":["true"],"work_dir":".","timeout_ms":-1}`, "timeout_ms", []string{"field timeout_ms must be a positive number of milliseconds, not -1"}},
		{"run_code without a timeout", runCode, `{` + runCodeEnv + `,"code":"1"}`, "timeout_ms", []string{"field timeout_ms is required"}},
		{"reclaim without a timeout", reclaim, `{` + reclaimEnv + `,"dir":"d","work_dir":"."}`, "timeout_ms", []string{"field timeout_ms is required"}},
		{"reset with a zero timeout", reset, `{` + resetEnv + `,"timeout_ms":0}`, "timeout_ms", []string{"field timeout_ms is required"}},
		{"argv as a string", exec, `{` + env + `,"argv":"ls -l","work_dir":".","timeout_ms":1000}`, "argv", []string{"field argv must be a list of strings, not a string"}},
		{"scope as a number", exec, `{"type":"` + messages.APIExecRequestType + `","key":{"scope":3,"thread_id":"t","agent_id":"a"},"sandbox":"` + handle + `","argv":["true"],"work_dir":".","timeout_ms":1000}`, "key.scope", []string{"field key.scope must be a string, not a number"}},
		{"a nested limit as a string", messages.SubjectAcquire, `{"type":"` + messages.APIAcquireRequestType + `","key":{"scope":"s","thread_id":"t","agent_id":"a"},"spec":{"kind":"shell","files_in":{"max_files":"many"}}}`, "spec.files_in.max_files", []string{"field spec.files_in.max_files must be an integer, not a string"}},
		{"an unknown field", exec, `{` + env + `,"argv":["true"],"work_dir":".","timeout_ms":1000,"timeout":5}`, "timeout", []string{`unknown field "timeout"`}},
		{"no type", exec, `{"argv":["true"]}`, "type", []string{"no type"}},
		{"negative wait", exec, `{` + env + `,"wait_ms":-5,"argv":["true"],"work_dir":".","timeout_ms":1000}`, "wait_ms", []string{"field wait_ms must not be negative"}},
		{"no handle", exec, `{"type":"` + messages.APIExecRequestType + `","key":{"scope":"tenant","thread_id":"thread","agent_id":"agent"},"argv":["true"],"work_dir":".","timeout_ms":1000}`, "sandbox", []string{"names no sandbox"}},
		{"no key", exec, `{"type":"` + messages.APIExecRequestType + `","sandbox":"` + handle + `","argv":["true"],"work_dir":".","timeout_ms":1000}`, "key", []string{"missing key"}},
		{"no scope", messages.SubjectAcquire, `{"type":"` + messages.APIAcquireRequestType + `","key":{"thread_id":"t","agent_id":"a"},"spec":{"kind":"shell"}}`, "key.scope", []string{"missing key", "scope"}},
	}
	raw := newRawConn(t, e)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, header := rawRequest(t, raw, tc.subject, []byte(tc.body))
			if resp.Error == nil || resp.Error.Code != messages.CodeBadRequest || header != messages.CodeBadRequest {
				t.Fatalf("reply %+v (header %q), want bad_request", resp.Error, header)
			}
			for _, w := range tc.wantText {
				if !strings.Contains(resp.Error.Message, w) {
					t.Fatalf("message %q does not say %q", resp.Error.Message, w)
				}
			}
			for _, goTalk := range []string{"Go value", "Go struct", "messages.", "int64", "[]string", "json:", "unmarshal"} {
				if strings.Contains(resp.Error.Message, goTalk) {
					t.Fatalf("message %q speaks Go (%q)", resp.Error.Message, goTalk)
				}
			}
			if resp.Error.Field != tc.wantField {
				t.Fatalf("error.field %q, want %q (message %q)", resp.Error.Field, tc.wantField, resp.Error.Message)
			}
		})
	}
}

// TestEmptyBodyHealthAndDeclarations: a health or declarations request with no body at all
// (what the nats CLI sends for an empty payload) is answered.
func TestEmptyBodyHealthAndDeclarations(t *testing.T) {
	e := startEngine(t, newFake(t))
	raw := newRawConn(t, e)
	for subject, want := range map[string]string{
		messages.SubjectHealth:       messages.APIHealthResponseType,
		messages.SubjectDeclarations: messages.APIDeclarationsResponseType,
	} {
		resp, _ := rawRequest(t, raw, subject, nil)
		if resp.Error != nil || resp.Type != want {
			t.Fatalf("%s with an empty body: %+v", subject, resp)
		}
	}
}

// TestEmptyThreadAndAgentAreKeys: the reference accepts an empty thread_id and agent_id, so
// acquire, a call, dispose and dispose_scope take them; only a missing scope is refused.
func TestEmptyThreadAndAgentAreKeys(t *testing.T) {
	e := startEngine(t, newFake(t))
	c := newClient(t, e)
	ctx := ctxT(t)
	for _, key := range []sandbox.Key{
		{Scope: "tenant"},
		{Scope: "tenant", ThreadID: "thread"},
		{Scope: "tenant", AgentID: "agent"},
	} {
		sb, err := c.Acquire(ctx, key, testSpec(t))
		if err != nil {
			t.Fatalf("acquire %+v: %v", key, err)
		}
		if err := sb.WriteFile(ctx, "f.txt", []byte("x"), "."); err != nil {
			t.Fatalf("write under %+v: %v", key, err)
		}
		if f := c.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Fatalf("dispose %+v: %+v", key, f)
		}
		if p := c.DisposeScope(ctx, key.Scope, key.ThreadID); p.Undisposed != nil {
			t.Fatalf("dispose scope %+v: %+v", key, p.Undisposed)
		}
	}
}
