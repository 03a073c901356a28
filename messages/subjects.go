package messages

import (
	"fmt"
	"regexp"
)

// DefaultPrefix starts every subject of the API. Engines that share a prefix form one pool:
// they answer the shared subjects in one queue group, so they must drive the same Docker
// daemon (see docs/operations.md). service.WithPrefix gives a pool its own.
const DefaultPrefix = "maf.sandbox.api"

// QueueGroup is the queue group of the shared subjects: each request on one of them reaches
// one engine of the pool.
const QueueGroup = "maf-sandbox-engines"

// ServiceName is the nats micro service name: `$SRV.PING.maf-sandbox-engine` lists the
// engines, `$SRV.INFO.maf-sandbox-engine` their endpoints, `$SRV.STATS.maf-sandbox-engine`
// their counters.
const ServiceName = "maf-sandbox-engine"

// Subjects. Each is declared twice: the form under [DefaultPrefix] (with a * where the
// engine ID goes, to subscribe to) and a T template that [fmt.Sprintf] fills with the prefix
// and, for per-engine subjects, the engine ID. Shared subjects are answered in [QueueGroup];
// per-engine subjects (…engine.<id>.…) by that engine alone, queue group disabled. Every
// request and reply is a JSON message of package messages.
const (
	// SubjectAcquire gets or creates a sandbox on any engine of the pool.
	// APIAcquireRequest → APIAcquireResponse; queue group QueueGroup.
	SubjectAcquire  = DefaultPrefix + ".v1.acquire"
	SubjectAcquireT = "%s.v1.acquire"
	// SubjectDispose deletes a key's sandboxes, found by label on the pool's daemon.
	// APIDisposeRequest → APIDisposeResponse; queue group QueueGroup.
	SubjectDispose  = DefaultPrefix + ".v1.dispose"
	SubjectDisposeT = "%s.v1.dispose"
	// SubjectDisposeScope deletes every sandbox of a conversation.
	// APIDisposeScopeRequest → APIDisposeScopeResponse; queue group QueueGroup.
	SubjectDisposeScope  = DefaultPrefix + ".v1.dispose_scope"
	SubjectDisposeScopeT = "%s.v1.dispose_scope"
	// SubjectReap sweeps sandboxes older than an age.
	// APIReapRequest → APIReapResponse; queue group QueueGroup.
	SubjectReap  = DefaultPrefix + ".v1.reap"
	SubjectReapT = "%s.v1.reap"
	// SubjectDeclarations describes the pool's backends.
	// APIDeclarationsRequest → APIDeclarationsResponse; queue group QueueGroup.
	SubjectDeclarations  = DefaultPrefix + ".v1.declarations"
	SubjectDeclarationsT = "%s.v1.declarations"
	// SubjectHealth says whether an engine of the pool serves.
	// APIHealthRequest → APIHealthResponse; queue group QueueGroup.
	SubjectHealth  = DefaultPrefix + ".v1.health"
	SubjectHealthT = "%s.v1.health"

	// SubjectEngineAcquire acquires on one engine: the client sends a key's later acquires
	// to the engine that served it. APIAcquireRequest → APIAcquireResponse; no queue group.
	SubjectEngineAcquire  = DefaultPrefix + ".v1.engine.*.acquire"
	SubjectEngineAcquireT = "%s.v1.engine.%s.acquire"
	// SubjectEngineDispose disposes through one engine.
	// APIDisposeRequest → APIDisposeResponse; no queue group.
	SubjectEngineDispose  = DefaultPrefix + ".v1.engine.*.dispose"
	SubjectEngineDisposeT = "%s.v1.engine.%s.dispose"
	// SubjectEngineDisposeScope purges a conversation through one engine.
	// APIDisposeScopeRequest → APIDisposeScopeResponse; no queue group.
	SubjectEngineDisposeScope  = DefaultPrefix + ".v1.engine.*.dispose_scope"
	SubjectEngineDisposeScopeT = "%s.v1.engine.%s.dispose_scope"
	// SubjectEngineReap sweeps through one engine.
	// APIReapRequest → APIReapResponse; no queue group.
	SubjectEngineReap  = DefaultPrefix + ".v1.engine.*.reap"
	SubjectEngineReapT = "%s.v1.engine.%s.reap"
	// SubjectEngineDeclarations describes one engine's backends.
	// APIDeclarationsRequest → APIDeclarationsResponse; no queue group.
	SubjectEngineDeclarations  = DefaultPrefix + ".v1.engine.*.declarations"
	SubjectEngineDeclarationsT = "%s.v1.engine.%s.declarations"
	// SubjectEngineHealth asks one engine how it is.
	// APIHealthRequest → APIHealthResponse; no queue group.
	SubjectEngineHealth  = DefaultPrefix + ".v1.engine.*.health"
	SubjectEngineHealthT = "%s.v1.engine.%s.health"

	// SubjectEngineListSandboxes lists the sandboxes one engine holds, paged and filtered
	// (the operator console's inventory). APIListSandboxesRequest → APIListSandboxesResponse;
	// no queue group.
	SubjectEngineListSandboxes  = DefaultPrefix + ".v1.engine.*.list_sandboxes"
	SubjectEngineListSandboxesT = "%s.v1.engine.%s.list_sandboxes"

	// SubjectEngineLameDuck puts one engine in lame duck (it takes no new sandboxes and
	// keeps those it holds). APILameDuckRequest → APILameDuckResponse; no queue group; with
	// tenancy, operators only.
	SubjectEngineLameDuck  = DefaultPrefix + ".v1.engine.*.lame_duck"
	SubjectEngineLameDuckT = "%s.v1.engine.%s.lame_duck"

	// SubjectEngineAlive answers as long as the engine runs: through its drain too, until its
	// last in-flight call has replied. A client waiting on a long call asks it now and then,
	// and gives up at once when nobody answers (the engine died), or when the engine's
	// connection is younger than the call (the request or reply may be lost). Any request →
	// [AliveReply] (empty from older engines); a plain subscription, not a micro endpoint, so
	// that it outlives the endpoints' drain; no queue group.
	SubjectEngineAlive  = DefaultPrefix + ".v1.engine.*.alive"
	SubjectEngineAliveT = "%s.v1.engine.%s.alive"
	// SubjectAlive is answered by every engine of the pool (no queue group) with its
	// [AliveReply]: a client whose call on a shared subject waits long asks it, collects the
	// answers for a moment, and learns whether any engine's connection was re-established
	// since the call was sent. A plain subscription, not a micro endpoint.
	SubjectAlive  = DefaultPrefix + ".v1.alive"
	SubjectAliveT = "%s.v1.alive"

	// SubjectExec runs a command in a sandbox the engine holds, streaming output chunks to
	// the request's stream_to when set. APIExecRequest → APIExecResponse (and APIExecChunk
	// messages on stream_to); no queue group.
	SubjectExec  = DefaultPrefix + ".v1.engine.*.exec"
	SubjectExecT = "%s.v1.engine.%s.exec"
	// SubjectProcessStart starts a process that lives across calls in a sandbox the engine
	// holds. APIProcessStartRequest → APIProcessStartResponse; no queue group.
	SubjectProcessStart  = DefaultPrefix + ".v1.engine.*.process_start"
	SubjectProcessStartT = "%s.v1.engine.%s.process_start"
	// SubjectProcessList lists a sandbox's processes.
	// APIProcessListRequest → APIProcessListResponse; no queue group.
	SubjectProcessList  = DefaultPrefix + ".v1.engine.*.process_list"
	SubjectProcessListT = "%s.v1.engine.%s.process_list"
	// SubjectProcessRead reads a process's output from a sequence, waiting for more when
	// asked. APIProcessReadRequest → APIProcessReadResponse; no queue group.
	SubjectProcessRead  = DefaultPrefix + ".v1.engine.*.process_read"
	SubjectProcessReadT = "%s.v1.engine.%s.process_read"
	// SubjectProcessStdin writes to a process's standard input.
	// APIProcessStdinRequest → APIProcessStdinResponse; no queue group.
	SubjectProcessStdin  = DefaultPrefix + ".v1.engine.*.process_stdin"
	SubjectProcessStdinT = "%s.v1.engine.%s.process_stdin"
	// SubjectProcessCloseStdin closes a process's standard input.
	// APIProcessCloseStdinRequest → APIProcessCloseStdinResponse; no queue group.
	SubjectProcessCloseStdin  = DefaultPrefix + ".v1.engine.*.process_close_stdin"
	SubjectProcessCloseStdinT = "%s.v1.engine.%s.process_close_stdin"
	// SubjectProcessResize sets the size of a process's terminal.
	// APIProcessResizeRequest → APIProcessResizeResponse; no queue group.
	SubjectProcessResize  = DefaultPrefix + ".v1.engine.*.process_resize"
	SubjectProcessResizeT = "%s.v1.engine.%s.process_resize"
	// SubjectProcessSignal sends a signal to a process's group.
	// APIProcessSignalRequest → APIProcessSignalResponse; no queue group.
	SubjectProcessSignal  = DefaultPrefix + ".v1.engine.*.process_signal"
	SubjectProcessSignalT = "%s.v1.engine.%s.process_signal"
	// SubjectProcessWait answers once a process has ended and its output is complete.
	// APIProcessWaitRequest → APIProcessWaitResponse; no queue group.
	SubjectProcessWait  = DefaultPrefix + ".v1.engine.*.process_wait"
	SubjectProcessWaitT = "%s.v1.engine.%s.process_wait"
	// SubjectRunCode evaluates code in the guest runtime.
	// APIRunCodeRequest → APIRunCodeResponse; no queue group.
	SubjectRunCode  = DefaultPrefix + ".v1.engine.*.run_code"
	SubjectRunCodeT = "%s.v1.engine.%s.run_code"
	// SubjectWriteFile writes a file, inline or from an upload.
	// APIWriteFileRequest → APIWriteFileResponse; no queue group.
	SubjectWriteFile  = DefaultPrefix + ".v1.engine.*.write_file"
	SubjectWriteFileT = "%s.v1.engine.%s.write_file"
	// SubjectUploadChunk takes one chunk of a file to write.
	// APIUploadChunkRequest → APIUploadChunkResponse; no queue group.
	SubjectUploadChunk  = DefaultPrefix + ".v1.engine.*.upload_chunk"
	SubjectUploadChunkT = "%s.v1.engine.%s.upload_chunk"
	// SubjectReadFile reads a file, inline or as a transfer to download.
	// APIReadFileRequest → APIReadFileResponse; no queue group.
	SubjectReadFile  = DefaultPrefix + ".v1.engine.*.read_file"
	SubjectReadFileT = "%s.v1.engine.%s.read_file"
	// SubjectDownloadChunk hands out one chunk of a transfer.
	// APIDownloadChunkRequest → APIDownloadChunkResponse; no queue group.
	SubjectDownloadChunk  = DefaultPrefix + ".v1.engine.*.download_chunk"
	SubjectDownloadChunkT = "%s.v1.engine.%s.download_chunk"
	// SubjectStatFile describes a path without following it.
	// APIStatFileRequest → APIStatFileResponse; no queue group.
	SubjectStatFile  = DefaultPrefix + ".v1.engine.*.stat_file"
	SubjectStatFileT = "%s.v1.engine.%s.stat_file"
	// SubjectRemove deletes a path.
	// APIRemoveRequest → APIRemoveResponse; no queue group.
	SubjectRemove  = DefaultPrefix + ".v1.engine.*.remove"
	SubjectRemoveT = "%s.v1.engine.%s.remove"
	// SubjectListDir lists a directory.
	// APIListDirRequest → APIListDirResponse; no queue group.
	SubjectListDir  = DefaultPrefix + ".v1.engine.*.list_dir"
	SubjectListDirT = "%s.v1.engine.%s.list_dir"
	// SubjectReclaim removes a framework-created directory.
	// APIReclaimRequest → APIReclaimResponse; no queue group.
	SubjectReclaim  = DefaultPrefix + ".v1.engine.*.reclaim"
	SubjectReclaimT = "%s.v1.engine.%s.reclaim"
	// SubjectReset restores a sandbox's baseline.
	// APIResetRequest → APIResetResponse; no queue group.
	SubjectReset  = DefaultPrefix + ".v1.engine.*.reset"
	SubjectResetT = "%s.v1.engine.%s.reset"
	// SubjectCollectOutputs collects a sandbox's declared outputs.
	// APICollectOutputsRequest → APICollectOutputsResponse; no queue group.
	SubjectCollectOutputs  = DefaultPrefix + ".v1.engine.*.collect_outputs"
	SubjectCollectOutputsT = "%s.v1.engine.%s.collect_outputs"
	// SubjectFingerprint fingerprints a sandbox the engine holds: phase baseline keeps the
	// measurement, phase final compares the sandbox with it (docker-backend §12.5).
	// APIFingerprintRequest → APIFingerprintResponse; no queue group.
	SubjectFingerprint  = DefaultPrefix + ".v1.engine.*.fingerprint"
	SubjectFingerprintT = "%s.v1.engine.%s.fingerprint"
	// SubjectRunProgram runs a host-tools program in a sandbox and serves its tool calls,
	// each as an APIHostToolCall request to the subject the request names for the tool.
	// APIRunProgramRequest → APIRunProgramResponse; no queue group.
	SubjectRunProgram  = DefaultPrefix + ".v1.engine.*.run_program"
	SubjectRunProgramT = "%s.v1.engine.%s.run_program"
)

// Shared formats the subject of a shared template for prefix.
func Shared(template, prefix string) string { return fmt.Sprintf(template, prefix) }

// Engine formats the subject of a per-engine template for prefix and engine.
func Engine(template, prefix, engine string) string { return fmt.Sprintf(template, prefix, engine) }

var (
	tokenRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

// ValidPrefix reports whether prefix is a subject prefix engines and clients accept:
// dot-separated tokens of letters, digits, '-' and '_'.
func ValidPrefix(prefix string) bool { return prefixRE.MatchString(prefix) }

// ValidToken reports whether id can be one subject token (an engine ID, a transfer ID): 1 to
// 64 letters, digits, '-' or '_'.
func ValidToken(id string) bool { return tokenRE.MatchString(id) }
