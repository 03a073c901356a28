package messages

import "encoding/json"

// Host tools over NATS: a run_program request runs a guest program in a sandbox the engine
// holds and serves its host-tool calls, each one forwarded as an [APIHostToolCall] request to
// the subject the tool names, where the caller (or whoever it chose) answers it.

// Type values of the host-tools messages.
const (
	APIRunProgramRequestType  = APITypePrefix + "run_program_request"
	APIRunProgramResponseType = APITypePrefix + "run_program_response"
	APIHostToolCallType       = APITypePrefix + "host_tool_call"
)

// APIRunProgramRequest runs Source as the program of a fresh run directory (RunDir, or one
// the engine picks under the sandbox's storage base) for at most TimeoutMS, serving the tools
// listed. The registry fields are the host's policy, enforced by the engine: they default as
// a Go registry does (require_declared false, allowed_identities ["app"]), the caps to the
// acquire's spec's host_tools (else 16 calls a run and the default transfer limits), which a
// run may lower and never raise.
type APIRunProgramRequest struct {
	APIEnvelope
	Source            string             `json:"source"`
	Program           string             `json:"program,omitempty"`
	RunDir            string             `json:"run_dir,omitempty"`
	TimeoutMS         int64              `json:"timeout_ms"`
	PollMS            int64              `json:"poll_ms,omitempty"`
	Interpreter       string             `json:"interpreter,omitempty"`
	Tools             []APIHostTool      `json:"tools"`
	RequireDeclared   bool               `json:"require_declared,omitempty"`
	AllowedIdentities []string           `json:"allowed_identities,omitempty"`
	MaxCallsPerRun    int                `json:"max_calls_per_run,omitempty"`
	ResponseLimits    *APITransferLimits `json:"response_limits,omitempty"`
	// KeepRun leaves work/ for collect_outputs or later calls; host_tools/ always goes.
	KeepRun bool `json:"keep_run,omitempty"`
}

// APIHostTool is one tool of a run: Subject is where the engine sends each call (a plain
// subject, no wildcards, not under the API's prefix or $). Declaration holds the three legs
// source, sink and identity, each present (null is an answer); a missing or partial
// declaration is undeclared. Params are the keyword arguments the tool binds, unless
// AnyArguments. TimeoutMS bounds one call's wait for its reply (default: the run's timeout).
type APIHostTool struct {
	Name         string                     `json:"name"`
	Subject      string                     `json:"subject"`
	Declaration  map[string]json.RawMessage `json:"declaration,omitempty"`
	Params       []APIHostToolParam         `json:"params,omitempty"`
	AnyArguments bool                       `json:"any_arguments,omitempty"`
	TimeoutMS    int64                      `json:"timeout_ms,omitempty"`
}

// APIHostToolParam is one keyword argument a tool binds.
type APIHostToolParam struct {
	Name     string `json:"name"`
	Required bool   `json:"required,omitempty"`
}

// APIRunProgramResponse is a finished program: the exit code its marker claims (the guest's
// claim) and its combined output. A run past its bound fails with program_timeout instead,
// whose detail carries output, signal and reach.
type APIRunProgramResponse struct {
	APIResponse
	ExitCode int     `json:"exit_code"`
	Output   APIBlob `json:"output"`
	Note     string  `json:"note,omitempty"` // why the output is missing, when it is
	Calls    int     `json:"calls"`
	RunDir   string  `json:"run_dir"`
}

// APIHostToolCall is what the engine sends a tool's subject for one call, as a request; the
// reply is an [APIHostToolReply]. Arguments are the guest's, already checked against the
// tool's params.
type APIHostToolCall struct {
	Type      string          `json:"type"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Call      int             `json:"call"`
	RunDir    string          `json:"run_dir"`
	Key       *APIKey         `json:"key,omitempty"`
}

// APIHostToolReply is a tool server's answer: the value to hand the guest, or an error,
// which reaches the guest only as a generic refusal. A reply with a Nats-Service-Error header
// is an error too.
type APIHostToolReply struct {
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}
