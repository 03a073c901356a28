package service

import (
	"github.com/mafsandbox/engine/messages"
)

// operations is every call of the API: its endpoint name, subjects, message types and
// handler. docs/nats-api.md has the same table.
var operations = []operation{
	{"acquire", messages.SubjectAcquireT, messages.SubjectEngineAcquireT, messages.APIAcquireRequestType, messages.APIAcquireResponseType, acquire, "gets or creates the sandbox of a key and kind; replies with its handle and engine"},
	{"dispose", messages.SubjectDisposeT, messages.SubjectEngineDisposeT, messages.APIDisposeRequestType, messages.APIDisposeResponseType, dispose, "deletes a key's sandboxes; never fails the caller"},
	{"dispose_scope", messages.SubjectDisposeScopeT, messages.SubjectEngineDisposeScopeT, messages.APIDisposeScopeRequestType, messages.APIDisposeScopeResponseType, disposeScope, "deletes every sandbox of a conversation (scope and thread_id)"},
	{"reap", messages.SubjectReapT, messages.SubjectEngineReapT, messages.APIReapRequestType, messages.APIReapResponseType, reap, "sweeps sandboxes, proxies and networks older than an age"},
	{"declarations", messages.SubjectDeclarationsT, messages.SubjectEngineDeclarationsT, messages.APIDeclarationsRequestType, messages.APIDeclarationsResponseType, declarations, "describes the engine's backends and message limits"},
	{"health", messages.SubjectHealthT, messages.SubjectEngineHealthT, messages.APIHealthRequestType, messages.APIHealthResponseType, health, "says whether the engine serves: ok or draining, in-flight calls, handles held"},
	{"list_sandboxes", "", messages.SubjectEngineListSandboxesT, messages.APIListSandboxesRequestType, messages.APIListSandboxesResponseType, listSandboxes, "lists the sandboxes this engine holds, paged, filtered by scope, kind, instance, image, egress, age, last call and state"},
	{"lame_duck", "", messages.SubjectEngineLameDuckT, messages.APILameDuckRequestType, messages.APILameDuckResponseType, lameDuck, "puts this engine in lame duck: no new sandboxes, the ones it holds kept"},
	{"exec", "", messages.SubjectExecT, messages.APIExecRequestType, messages.APIExecResponseType, exec, "runs a command (argv or shell) in a sandbox; streams chunks to stream_to when set"},
	{"run_code", "", messages.SubjectRunCodeT, messages.APIRunCodeRequestType, messages.APIRunCodeResponseType, runCode, "evaluates code in the sandbox's runtime"},
	{"write_file", "", messages.SubjectWriteFileT, messages.APIWriteFileRequestType, messages.APIWriteFileResponseType, writeFile, "replaces a file byte-exact, inline or from upload_chunk chunks"},
	{"upload_chunk", "", messages.SubjectUploadChunkT, messages.APIUploadChunkRequestType, messages.APIUploadChunkResponseType, uploadChunk, "sends one chunk of a large write_file"},
	{"read_file", "", messages.SubjectReadFileT, messages.APIReadFileRequestType, messages.APIReadFileResponseType, readFile, "reads a regular file, inline or as a held transfer"},
	{"download_chunk", "", messages.SubjectDownloadChunkT, messages.APIDownloadChunkRequestType, messages.APIDownloadChunkResponseType, downloadChunk, "fetches one chunk of a held transfer"},
	{"stat_file", "", messages.SubjectStatFileT, messages.APIStatFileRequestType, messages.APIStatFileResponseType, statFile, "describes one path without following its last component"},
	{"remove", "", messages.SubjectRemoveT, messages.APIRemoveRequestType, messages.APIRemoveResponseType, remove, "removes a path; absent is success"},
	{"list_dir", "", messages.SubjectListDirT, messages.APIListDirRequestType, messages.APIListDirResponseType, listDir, "lists a directory"},
	{"reclaim", "", messages.SubjectReclaimT, messages.APIReclaimRequestType, messages.APIReclaimResponseType, reclaim, "removes a framework-created directory"},
	{"pause", "", messages.SubjectPauseT, messages.APIPauseRequestType, messages.APIPauseResponseType, pause, "pauses a sandbox now: its processes kept, frozen; the next call that needs it running wakes it"},
	{"snapshot", "", messages.SubjectSnapshotT, messages.APISnapshotRequestType, messages.APISnapshotResponseType, snapshot, "records a sandbox's filesystem (its changes against its image) as a snapshot"},
	{"restore", messages.SubjectRestoreT, messages.SubjectEngineRestoreT, messages.APIRestoreRequestType, messages.APIRestoreResponseType, restore, "puts a key's sandbox back to a snapshot: a new instance in its place"},
	{"fork", messages.SubjectForkT, messages.SubjectEngineForkT, messages.APIForkRequestType, messages.APIForkResponseType, fork, "makes new sandboxes for new keys from one snapshot"},
	{"snapshots", messages.SubjectSnapshotsT, messages.SubjectEngineSnapshotsT, messages.APISnapshotsRequestType, messages.APISnapshotsResponseType, snapshots, "describes a snapshot, lists a conversation's, or deletes one"},
	{"reset", "", messages.SubjectResetT, messages.APIResetRequestType, messages.APIResetResponseType, reset, "replaces the sandbox's instance"},
	{"fingerprint", "", messages.SubjectFingerprintT, messages.APIFingerprintRequestType, messages.APIFingerprintResponseType, fingerprint, "fingerprints a sandbox before (baseline) and after (final) a kind's call; the final reply compares them"},
	{"collect_outputs", "", messages.SubjectCollectOutputsT, messages.APICollectOutputsRequestType, messages.APICollectOutputsResponseType, collectOutputs, "collects the outputs the acquire's spec declares"},
	{"process_start", "", messages.SubjectProcessStartT, messages.APIProcessStartRequestType, messages.APIProcessStartResponseType, processStart, "starts a process that lives across calls (argv or shell, env, work_dir, user, terminal, stdin, timeout, retention); a repeated id returns the same process"},
	{"process_list", "", messages.SubjectProcessListT, messages.APIProcessListRequestType, messages.APIProcessListResponseType, processList, "lists a sandbox's processes, running and ended, in start order"},
	{"process_read", "", messages.SubjectProcessReadT, messages.APIProcessReadRequestType, messages.APIProcessReadResponseType, processRead, "reads a process's output from a sequence, waiting up to follow_ms for more; a cut says what is no longer held"},
	{"process_stdin", "", messages.SubjectProcessStdinT, messages.APIProcessStdinRequestType, messages.APIProcessStdinResponseType, processStdin, "writes to a process's standard input"},
	{"process_close_stdin", "", messages.SubjectProcessCloseStdinT, messages.APIProcessCloseStdinRequestType, messages.APIProcessCloseStdinResponseType, processCloseStdin, "closes a process's standard input"},
	{"process_resize", "", messages.SubjectProcessResizeT, messages.APIProcessResizeRequestType, messages.APIProcessResizeResponseType, processResize, "sets the size of a process's terminal"},
	{"process_signal", "", messages.SubjectProcessSignalT, messages.APIProcessSignalRequestType, messages.APIProcessSignalResponseType, processSignal, "sends a signal to a process's group"},
	{"process_wait", "", messages.SubjectProcessWaitT, messages.APIProcessWaitRequestType, messages.APIProcessWaitResponseType, processWait, "answers once a process has ended and its output is complete"},
	{"run_program", "", messages.SubjectRunProgramT, messages.APIRunProgramRequestType, messages.APIRunProgramResponseType, runProgram, "runs a host-tools program; each tool call is a request to the subject the tool names"},
}
