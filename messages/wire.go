package messages

import (
	"encoding/json"
	"time"
)

// The wire messages of the NATS API (package service answers them, package client sends
// them). They are JSON with snake_case names. Every request carries an [APIEnvelope] and
// every response an [APIResponse], each with a type value naming the message and the API
// version; requests and responses come in pairs (APIExecRequest, APIExecResponse). Byte
// fields ([]byte) travel as standard base64, durations as integer milliseconds in fields
// ending _ms. docs/nats-api.md describes every message.

// APIVersion is the version every type value below carries.
const APIVersion = "v1"

// APITypePrefix starts every type value.
const APITypePrefix = "maf.sandbox.api.v1."

// Type values of the wire messages, in request/response pairs.
const (
	APIAcquireRequestType         = APITypePrefix + "acquire_request"
	APIAcquireResponseType        = APITypePrefix + "acquire_response"
	APIExecRequestType            = APITypePrefix + "exec_request"
	APIExecResponseType           = APITypePrefix + "exec_response"
	APIExecChunkType              = APITypePrefix + "exec_chunk"
	APIRunCodeRequestType         = APITypePrefix + "run_code_request"
	APIRunCodeResponseType        = APITypePrefix + "run_code_response"
	APIWriteFileRequestType       = APITypePrefix + "write_file_request"
	APIWriteFileResponseType      = APITypePrefix + "write_file_response"
	APIUploadChunkRequestType     = APITypePrefix + "upload_chunk_request"
	APIUploadChunkResponseType    = APITypePrefix + "upload_chunk_response"
	APIReadFileRequestType        = APITypePrefix + "read_file_request"
	APIReadFileResponseType       = APITypePrefix + "read_file_response"
	APIDownloadChunkRequestType   = APITypePrefix + "download_chunk_request"
	APIDownloadChunkResponseType  = APITypePrefix + "download_chunk_response"
	APIStatFileRequestType        = APITypePrefix + "stat_file_request"
	APIStatFileResponseType       = APITypePrefix + "stat_file_response"
	APIRemoveRequestType          = APITypePrefix + "remove_request"
	APIRemoveResponseType         = APITypePrefix + "remove_response"
	APIListDirRequestType         = APITypePrefix + "list_dir_request"
	APIListDirResponseType        = APITypePrefix + "list_dir_response"
	APIReclaimRequestType         = APITypePrefix + "reclaim_request"
	APIReclaimResponseType        = APITypePrefix + "reclaim_response"
	APIResetRequestType           = APITypePrefix + "reset_request"
	APIResetResponseType          = APITypePrefix + "reset_response"
	APICollectOutputsRequestType  = APITypePrefix + "collect_outputs_request"
	APICollectOutputsResponseType = APITypePrefix + "collect_outputs_response"
	APIDisposeRequestType         = APITypePrefix + "dispose_request"
	APIDisposeResponseType        = APITypePrefix + "dispose_response"
	APIDisposeScopeRequestType    = APITypePrefix + "dispose_scope_request"
	APIDisposeScopeResponseType   = APITypePrefix + "dispose_scope_response"
	APIReapRequestType            = APITypePrefix + "reap_request"
	APIReapResponseType           = APITypePrefix + "reap_response"
	APIDeclarationsRequestType    = APITypePrefix + "declarations_request"
	APIDeclarationsResponseType   = APITypePrefix + "declarations_response"
	APIHealthRequestType          = APITypePrefix + "health_request"
	APIHealthResponseType         = APITypePrefix + "health_response"
)

// APIEnvelope is what every request carries around its body. Key is the host's: it comes
// from the request context of the host that sends the request, never from a command or a
// model. Sandbox names the handle an acquire returned, for the calls addressed to one
// sandbox; the engine refuses a handle that was acquired under another key.
type APIEnvelope struct {
	Type    string  `json:"type"`
	Key     *APIKey `json:"key,omitempty"`
	Sandbox string  `json:"sandbox,omitempty"`
	// WaitMS is how long the caller will wait for the reply; the engine abandons the call
	// after it. 0 leaves the call bounded by its own timeouts only.
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// APIKey is a sandbox key. Every call that names a key needs scope; an empty thread_id or
// agent_id is a key like any other, as the Python reference has it. call_id is set only for
// call-scoped workloads.
type APIKey struct {
	Scope    string `json:"scope"`
	ThreadID string `json:"thread_id"`
	AgentID  string `json:"agent_id,omitempty"`
	CallID   string `json:"call_id,omitempty"`
}

// APIResponse is what every response carries: its type, and the error when the call failed
// (then the other fields are zero).
type APIResponse struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error,omitempty"`
}

// APIError is a failure: a stable code from the table in package service, the error's text,
// and the typed error's fields (snake_case) from which a Go client rebuilds the same error.
// Field is set on a bad_request that one request field caused: its JSON path from the body's
// root ("timeout_ms", "key.scope", "spec.files_in.max_files").
type APIError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Field   string          `json:"field,omitempty"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// APIBlob is a byte payload: inline in Data when it fits in one message, otherwise left on
// the engine as a transfer that the client fetches chunk by chunk with download_chunk
// requests. Size and SHA256 (lower-case hex) describe the whole content either way, and the
// receiver checks both.
type APIBlob struct {
	Data     []byte `json:"data,omitempty"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Transfer string `json:"transfer,omitempty"`
	Chunks   int    `json:"chunks,omitempty"`
}

// APISpec is a workload spec. The engine builds it with sandbox.NewSpec: an omitted field
// takes the protocol's default (closed egress, requires exec and files_in, default transfer
// limits, conversation scope) and a bad value is refused as NewSpec refuses it.
type APISpec struct {
	Kind                    string              `json:"kind"`
	Image                   string              `json:"image,omitempty"`
	ImageID                 string              `json:"image_id,omitempty"`
	Egress                  string              `json:"egress,omitempty"`
	EgressAllow             []APIEgressRule     `json:"egress_allow,omitempty"`
	WorkDir                 *string             `json:"work_dir,omitempty"`
	Labels                  map[string]string   `json:"labels,omitempty"`
	Requires                []string            `json:"requires,omitempty"`
	MinIsolation            *string             `json:"min_isolation,omitempty"`
	DeclaredOutputs         []APIDeclaredOutput `json:"declared_outputs,omitempty"`
	FilesIn                 *APITransferLimits  `json:"files_in,omitempty"`
	FilesOut                *APITransferLimits  `json:"files_out,omitempty"`
	OutputsNamedAtCallTime  bool                `json:"outputs_named_at_call_time,omitempty"`
	RequiresOSFamily        *string             `json:"requires_os_family,omitempty"`
	HostTools               *APIHostTools       `json:"host_tools,omitempty"`
	IsolationScope          string              `json:"isolation_scope,omitempty"`
	MinCleanup              *string             `json:"min_cleanup,omitempty"`
	ConfinedToGuestCallPath bool                `json:"confined_to_guest_call_path,omitempty"`
	ExclusiveAdmission      bool                `json:"exclusive_admission,omitempty"`
	Resources               *APIResources       `json:"resources,omitempty"`
	Sleep                   *APISleep           `json:"sleep,omitempty"`
}

// APISleep overrides the engine's sleep times for one workload (sandbox.Sleep): paused after
// pause_after_ms without a call, stopped after stop_after_ms; 0 turns a step off.
type APISleep struct {
	PauseAfterMS int64 `json:"pause_after_ms"`
	StopAfterMS  int64 `json:"stop_after_ms"`
}

// APIResources bound one sandbox's memory (bytes), CPUs (a share of one CPU's time) and
// processes; an omitted or zero field states nothing. In a spec it is what the workload asks
// for, in declarations the most the backend lets one sandbox have (zero: no ceiling).
type APIResources struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
}

// APIEgressRule is one allowlist entry: `{"host": "pypi.org"}` (tunnel-only), or with methods
// and path patterns, `{"host": "api.github.com", "methods": ["GET"], "paths":
// ["/repos/acme/**"]}` (inspecting; grammar in sandbox.EgressRule and docs/nats-api.md). A bare
// JSON string decodes as a tunnel-only entry for that host.
type APIEgressRule struct {
	Host    string   `json:"host"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
	Shadow  bool     `json:"shadow,omitempty"`
	// Credentials the proxy adds on this host's requests (sandbox.EgressCredential): only in
	// an acquire request; the engine never answers with one.
	Credentials []APIEgressCredential `json:"credentials,omitempty"`
	Authority   string                `json:"authority,omitempty"`
}

// APIEgressCredential is one credential of an inspecting entry: `{"header": "Authorization",
// "env": "GITHUB_TOKEN", "secret": "ghp_…", "methods": ["GET"], "paths": ["/repos/acme/**"]}`.
// The workload's variable env holds a placeholder; the secret goes to the proxy alone.
type APIEgressCredential struct {
	Header  string   `json:"header"`
	Env     string   `json:"env"`
	Secret  string   `json:"secret"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// UnmarshalJSON decodes an entry written as an object or, today's shortest form, as a bare
// host string.
func (r *APIEgressRule) UnmarshalJSON(b []byte) error {
	var host string
	if err := json.Unmarshal(b, &host); err == nil {
		*r = APIEgressRule{Host: host}
		return nil
	}
	type plain APIEgressRule // no UnmarshalJSON: decodes the object form
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = APIEgressRule(p)
	return nil
}

// APIDeclaredOutput is a file a workload leaves for collection. Disposition defaults to
// land and Required to true.
type APIDeclaredOutput struct {
	Path        string  `json:"path"`
	Disposition string  `json:"disposition,omitempty"`
	MediaType   string  `json:"media_type,omitempty"`
	Required    *bool   `json:"required,omitempty"`
	Name        *string `json:"name,omitempty"`
}

// APITransferLimits caps one direction of file transfer.
type APITransferLimits struct {
	MaxBytesPerFile int64 `json:"max_bytes_per_file"`
	MaxTotalBytes   int64 `json:"max_total_bytes"`
	MaxFiles        int64 `json:"max_files"`
}

// APIHostTools is the sealed summary of a host-tool registry.
type APIHostTools struct {
	ResultIntegrity  *string           `json:"result_integrity,omitempty"`
	OutboundCaps     []string          `json:"outbound_caps,omitempty"`
	Identities       []string          `json:"identities,omitempty"`
	RequiresApproval bool              `json:"requires_approval,omitempty"`
	HasUndeclared    bool              `json:"has_undeclared,omitempty"`
	ResponseLimits   APITransferLimits `json:"response_limits"`
	MaxCallsPerRun   int               `json:"max_calls_per_run,omitempty"`
}

// APIAcquireRequest gets or creates the sandbox of (envelope key, spec.kind).
type APIAcquireRequest struct {
	APIEnvelope
	Spec APISpec `json:"spec"`
}

// APIAcquireResponse names the sandbox handed out.
type APIAcquireResponse struct {
	APIResponse
	Sandbox *APISandbox `json:"sandbox,omitempty"`
}

// APISandbox is an acquired sandbox. ID is the handle later calls put in the envelope's
// sandbox field; Engine is the engine that holds it, whose subjects those calls go to.
type APISandbox struct {
	ID         string `json:"id"`
	Engine     string `json:"engine"`
	Kind       string `json:"kind"`
	InstanceID string `json:"instance_id"`
	WorkDir    string `json:"work_dir,omitempty"`
	Created    bool   `json:"created"`
}

// APIExecRequest runs a command: exactly one of argv (element by element, never re-split)
// and shell (evaluated by sh -c). With stream_to set, the engine publishes
// [APIExecChunk] messages there as output arrives, before the response.
type APIExecRequest struct {
	APIEnvelope
	Argv           []string `json:"argv,omitempty"`
	Shell          string   `json:"shell,omitempty"`
	WorkDir        string   `json:"work_dir"`
	TimeoutMS      int64    `json:"timeout_ms"`
	MaxOutputBytes int64    `json:"max_output_bytes,omitempty"`
	StreamTo       string   `json:"stream_to,omitempty"`
}

// APIExecResult is a command's outcome: the real exit code and the separate output streams.
type APIExecResult struct {
	ExitCode           int     `json:"exit_code"`
	Stdout             APIBlob `json:"stdout"`
	Stderr             APIBlob `json:"stderr"`
	ProducerOwnsStderr bool    `json:"producer_owns_stderr,omitempty"`
	// NotStarted is set when the container runtime could not start the command's process
	// (sandbox.ExecResult.NotStarted): work_dir, program, not_executable, user or runtime.
	// ExitCode is then 127 (program) or 126, and Stderr holds the runtime's words.
	NotStarted string `json:"not_started,omitempty"`
	// Chunks is how many [APIExecChunk] messages went to stream_to before this response.
	Chunks int `json:"chunks,omitempty"`
	// ExecID is the engine's ID of this command, the one its chunks carry.
	ExecID string `json:"exec_id,omitempty"`
}

// APIExecResponse is an exec's result.
type APIExecResponse struct {
	APIResponse
	APIExecResult
}

// APIExecChunk is a piece of a streaming exec's output, published on the request's
// stream_to subject. Seq counts from 0 across both streams, in publishing order.
type APIExecChunk struct {
	Type   string `json:"type"`
	Seq    int    `json:"seq"`
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   []byte `json:"data"`
	// ExecID tells the chunks of two commands streamed to one subject apart (the response's
	// exec_id); RequestID is the call's request ID (the X-Request-Id header).
	ExecID    string `json:"exec_id"`
	RequestID string `json:"request_id"`
}

// APIRunCodeRequest evaluates code in the guest runtime.
type APIRunCodeRequest struct {
	APIEnvelope
	Code      string `json:"code"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// APIRunCodeResponse is the evaluation's result.
type APIRunCodeResponse struct {
	APIResponse
	APIExecResult
}

// APIWriteFileRequest writes a file byte-exact. The content is inline in content, or was
// sent before with upload_chunk requests under the upload id named here; size and sha256
// (lower-case hex) are checked against what arrived before anything is written (sha256 is
// required for an upload, optional inline).
type APIWriteFileRequest struct {
	APIEnvelope
	Path    string `json:"path"`
	WorkDir string `json:"work_dir"`
	Content []byte `json:"content,omitempty"`
	Upload  string `json:"upload,omitempty"`
	Size    int64  `json:"size,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
}

// APIWriteFileResponse says the write landed.
type APIWriteFileResponse struct {
	APIResponse
}

// APIUploadChunkRequest sends one piece of a file to write. Upload is an id the client
// chooses (a NATS token); seq counts from 0 and must arrive in order.
type APIUploadChunkRequest struct {
	APIEnvelope
	Upload string `json:"upload"`
	Seq    int    `json:"seq"`
	Data   []byte `json:"data"`
}

// APIUploadChunkResponse acknowledges a chunk with the bytes received so far.
type APIUploadChunkResponse struct {
	APIResponse
	Received int64 `json:"received"`
}

// APIReadFileRequest reads a regular file, refused above max_bytes (never truncated).
type APIReadFileRequest struct {
	APIEnvelope
	Path     string `json:"path"`
	WorkDir  string `json:"work_dir"`
	MaxBytes int64  `json:"max_bytes"`
}

// APIReadFileResponse carries the file.
type APIReadFileResponse struct {
	APIResponse
	Content APIBlob `json:"content"`
}

// APIDownloadChunkRequest fetches one chunk of a transfer an earlier response left on the
// engine. Fetching the last chunk releases the transfer.
type APIDownloadChunkRequest struct {
	APIEnvelope
	Transfer string `json:"transfer"`
	Seq      int    `json:"seq"`
}

// APIDownloadChunkResponse carries the chunk.
type APIDownloadChunkResponse struct {
	APIResponse
	Data []byte `json:"data"`
	Last bool   `json:"last"`
}

// APIStatFileRequest describes a path without following its last component.
type APIStatFileRequest struct {
	APIEnvelope
	Path    string `json:"path"`
	WorkDir string `json:"work_dir"`
}

// APIFileStat describes one guest entry; size is present only for a regular file.
type APIFileStat struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Size *int64 `json:"size,omitempty"`
}

// APIStatFileResponse carries the entry; stat is null when the entry does not exist.
type APIStatFileResponse struct {
	APIResponse
	Stat *APIFileStat `json:"stat"`
}

// APIRemoveRequest deletes a path (a link itself, never its target); a directory needs
// recursive.
type APIRemoveRequest struct {
	APIEnvelope
	Path      string `json:"path"`
	WorkDir   string `json:"work_dir"`
	Recursive bool   `json:"recursive,omitempty"`
}

// APIRemoveResponse says the removal landed (absent is success).
type APIRemoveResponse struct {
	APIResponse
}

// APIListDirRequest lists a directory's immediate children.
type APIListDirRequest struct {
	APIEnvelope
	Path    string `json:"path"`
	WorkDir string `json:"work_dir"`
}

// APIListDirResponse carries the children.
type APIListDirResponse struct {
	APIResponse
	Entries []APIFileStat `json:"entries"`
}

// APIReclaimRequest removes a framework-created directory below work_dir.
type APIReclaimRequest struct {
	APIEnvelope
	Dir       string `json:"dir"`
	WorkDir   string `json:"work_dir"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// APIReclaimResponse says the reclaim landed.
type APIReclaimResponse struct {
	APIResponse
}

// APIResetRequest restores the sandbox's pre-input baseline.
type APIResetRequest struct {
	APIEnvelope
	TimeoutMS int64 `json:"timeout_ms"`
}

// APIResetResponse carries the instance ID after the reset.
type APIResetResponse struct {
	APIResponse
	InstanceID string `json:"instance_id"`
}

// APICollectOutputsRequest collects the outputs the acquire's spec declares, plus
// call_time_outputs when the spec names outputs at call time, in the order and with the
// checks of sandbox.CollectOutputs. Normalization is the receiving sink's ("nfc", the
// default, or "none").
type APICollectOutputsRequest struct {
	APIEnvelope
	CallTimeOutputs []APIDeclaredOutput `json:"call_time_outputs,omitempty"`
	Normalization   string              `json:"normalization,omitempty"`
}

// APIArtifact is one collected landing output.
type APIArtifact struct {
	Name      string  `json:"name"`
	Kind      string  `json:"kind"`
	MediaType string  `json:"media_type,omitempty"`
	Content   APIBlob `json:"content"`
}

// APICollectOutputsResponse carries the artifacts in declaration order.
type APICollectOutputsResponse struct {
	APIResponse
	Artifacts []APIArtifact `json:"artifacts"`
}

// APIDisposeRequest deletes the envelope key's sandboxes: every kind, or only kind, or only
// one instance.
type APIDisposeRequest struct {
	APIEnvelope
	Kind       *string `json:"kind,omitempty"`
	InstanceID string  `json:"instance_id,omitempty"`
}

// APIDisposalFailure says a disposal may have left something behind. Code is one of
// unreachable, timeout, refused, unlisted, unknown; detail is for logs.
type APIDisposalFailure struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// APIDisposeResponse carries what may remain; undisposed null means nothing was reported.
// A disposal never fails the caller, so error is set only for a request that was refused
// (a missing key, say).
type APIDisposeResponse struct {
	APIResponse
	Undisposed *APIDisposalFailure `json:"undisposed,omitempty"`
}

// APIDisposeScopeRequest deletes every sandbox of the conversation (key.scope,
// key.thread_id).
type APIDisposeScopeRequest struct {
	APIEnvelope
}

// APIDisposeScopeResponse counts what was disposed and carries what may remain.
type APIDisposeScopeResponse struct {
	APIResponse
	Disposed   int                 `json:"disposed"`
	Undisposed *APIDisposalFailure `json:"undisposed,omitempty"`
}

// APIReapRequest sweeps sandboxes created more than older_than_ms ago, on every scope or
// only scope.
type APIReapRequest struct {
	APIEnvelope
	OlderThanMS int64  `json:"older_than_ms"`
	Scope       string `json:"scope,omitempty"`
}

// APIReapResult is what one age-based sweep did, in the one JSON spelling every form of it
// shares: the reap call's answer, the reap.completed event (package events) and engine reap
// --json. Counts include only successful removals.
type APIReapResult struct {
	Scope            *string           `json:"scope"`         // null: every scope
	OlderThanMS      int64             `json:"older_than_ms"` // the age swept
	Cutoff           time.Time         `json:"cutoff"`        // what was created strictly before it expired
	StartedAt        time.Time         `json:"started_at"`
	FinishedAt       time.Time         `json:"finished_at"`
	DryRun           bool              `json:"dry_run"`
	Disposed         int               `json:"disposed"`
	ProxiesRemoved   int               `json:"proxies_removed"`
	NetworksRemoved  int               `json:"networks_removed"`
	ObserversRemoved int               `json:"observers_removed"`
	Failures         []APIReapFailure  `json:"failures"`
	Resources        []APIReapResource `json:"resources,omitempty"` // every qualifying resource and what became of it; the event omits them
}

// APIReapFailure is one resource the sweep could not remove, or, without a resource, why it
// removed nothing (code unlisted).
type APIReapFailure struct {
	Code         string `json:"code"`
	Detail       string `json:"detail"`
	ResourceID   string `json:"resource_id,omitempty"`
	ResourceKind string `json:"resource_kind,omitempty"` // workload, proxy, network or observer
}

// APIReapResource is one qualifying resource and what the sweep did with it.
type APIReapResource struct {
	Group   string    `json:"group"`
	Kind    string    `json:"kind"`
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	Anchor  bool      `json:"anchor,omitempty"`
	Expired bool      `json:"expired,omitempty"`
	Action  string    `json:"action"`
}

// APIReapResponse is what the sweep did.
type APIReapResponse struct {
	APIResponse
	APIReapResult
}

// APIDeclarationsRequest asks what the engine's backends declare.
type APIDeclarationsRequest struct {
	APIEnvelope
}

// APIDeclarations is a backend's self-description. A null capabilities or limits means the
// protocol's default; an empty list is a real, empty declaration.
type APIDeclarations struct {
	Capabilities               []string             `json:"capabilities"`
	Limits                     *APISandboxLimits    `json:"limits"`
	EgressModes                []string             `json:"egress_modes"`
	OSFamilies                 []string             `json:"os_families"`
	IsolationScopes            []string             `json:"isolation_scopes"`
	ObservesEgress             bool                 `json:"observes_egress"`
	EgressMethodTokens         []string             `json:"egress_method_tokens,omitempty"`
	EgressPaths                bool                 `json:"egress_paths,omitempty"`
	AttachedIdentity           *APIAttachedIdentity `json:"attached_identity,omitempty"`
	RequiresExclusiveAdmission bool                 `json:"requires_exclusive_admission,omitempty"`
	Resources                  *APIResources        `json:"resources,omitempty"`
}

// APISandboxLimits are a backend's transfer ceilings in each direction.
type APISandboxLimits struct {
	FilesIn  APITransferLimits `json:"files_in"`
	FilesOut APITransferLimits `json:"files_out"`
}

// APIAttachedIdentity bounds a platform identity a backend attaches to sandboxes.
type APIAttachedIdentity struct {
	Scope            string   `json:"scope"`
	RetentionSeconds int64    `json:"retention_seconds"`
	Channels         []string `json:"channels,omitempty"`
}

// APIBackend is one backend the engine's router knows.
type APIBackend struct {
	Name         string          `json:"name"`
	Isolation    string          `json:"isolation"`
	Declarations APIDeclarations `json:"declarations"`
}

// APIDeclarationsResponse lists the engine's backends; selected names the one that serves
// specs (empty when the router selects per spec). The limits say what one message carries:
// content up to chunk_size bytes travels inline, anything larger in chunks of that size, and
// no file is larger than max_file_bytes.
type APIDeclarationsResponse struct {
	APIResponse
	Engine          string       `json:"engine"`
	Selected        string       `json:"selected,omitempty"`
	Backends        []APIBackend `json:"backends"`
	ChunkSize       int          `json:"chunk_size"`
	MaxRequestBytes int          `json:"max_request_bytes"`
	MaxFileBytes    int64        `json:"max_file_bytes"`
}

// APIHealthRequest asks whether the engine is serving.
type APIHealthRequest struct {
	APIEnvelope
}

// APIHealthResponse says how the engine is: status "ok"; "engine_unavailable" when its
// backend cannot reach the Docker daemon (daemon says why); or "draining" while it shuts
// down. Daemon is the answer of the round trip this request made to the daemon (absent for a
// backend that cannot be asked); LastError the last call that failed on the engine's side
// (codes internal, engine_unavailable, image_missing), absent when none has; Events the
// engine's event outboxes, absent on an engine that publishes none.
type APIHealthResponse struct {
	APIResponse
	Engine    string            `json:"engine"`
	Version   string            `json:"version"`
	Status    string            `json:"status"`
	StartedAt time.Time         `json:"started_at"`
	InFlight  int               `json:"in_flight"`
	Sandboxes int               `json:"sandboxes"`
	Backends  []string          `json:"backends"`
	Daemon    *APIDaemonHealth  `json:"daemon,omitempty"`
	LastError *APIHealthFailure `json:"last_error,omitempty"`
	Events    *APIEventsHealth  `json:"events,omitempty"`
}

// APIEventsHealth is what the engine's event outboxes hold and did (docs/events.md): the
// events held now, those of them blocked behind one a stream refuses to store (its limits
// reached with discard new: they wait for an operator), and since the start those dropped
// because an outbox was full, those refused for good, and the publishes a stream refused.
type APIEventsHealth struct {
	Pending        int   `json:"pending"`
	Blocked        int   `json:"blocked"`
	Dropped        int64 `json:"dropped"`
	Failed         int64 `json:"failed"`
	StreamRefusals int64 `json:"stream_refusals"`
}

// APIDaemonHealth is whether the daemon answered a health request's round trip, and the
// error (code engine_unavailable when it cannot be reached) when it did not.
type APIDaemonHealth struct {
	Reachable bool      `json:"reachable"`
	Error     *APIError `json:"error,omitempty"`
}

// APIHealthFailure is a call that failed on the engine's side: the operation, when, and its
// error as the call's reply carried it.
type APIHealthFailure struct {
	Op    string    `json:"op"`
	At    time.Time `json:"at"`
	Error APIError  `json:"error"`
}
