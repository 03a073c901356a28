// Package hosttools is the host side of the HOST_TOOLS capability (protocol §11): a guest
// program, typically model-written Python, calls functions that run in the host while it
// runs.
//
// # Registry and calls
//
// A [Registry] holds the tools a host offers, each with a complete [Declaration] (source,
// sink, identity; nil is an answer). [Registry.Aggregate] seals it and returns the summary a
// [sandbox.Spec] carries (see [sandbox.WithHostTools]), so the router folds the transport's
// traffic into its transfer-limit check. A [Run] is one program's ledger: its
// [Run.Call] applies the spec's checks in the spec's order and answers every call with a
// value or a refusal sentence, never an error to the guest.
//
// # The wire protocol
//
// [RunProgram] writes the program, the shim ([Shim], imported by the program as
// maf_host_tools) and the launcher into a fresh run directory, starts the program detached
// with one Exec, and serves its calls over the file plane alone: stat and read
// host_tools/host_tool_calls/NNNN.request.json in strict number order (reading ahead at most
// four), write NNNN.response.json. It uses only the public [sandbox.Sandbox] surface, so it
// runs on any backend that declares HOST_TOOLS.
//
// # The hint
//
// The poll is the floor. Where the sandbox streams exec output ([sandbox.StreamingExec]),
// [RunProgram] also runs [WatcherHint]: a python3 inotify watcher in the guest, one streamed
// exec, whose lines naming a request or the exit marker wake the supervisor before its next
// poll. A wake only brings a look forward: the request is still read, and checked, through
// the file plane. Wakes coalesce, and one whose look found nothing makes the next wait longer
// after a look (up to the poll interval), so forged lines buy a guest no more looks than the
// poll gives it. The watcher exits when host_tools/ is removed. [WithHint] replaces it, or
// with nil turns hints off.
//
// The run's own bound ends with a final look for the exit marker, then SIGKILL: to the
// program's process group only when the launcher announced one on its own stdout
// ("process-v1 <pid> <pgid>"), otherwise to the lone pid. It fails with
// [*sandbox.ProgramTimeoutError]. Every path removes host_tools/ through
// [sandbox.Sandbox.Reclaim]; work/ is the caller's, to collect from and then reclaim
// ([ReclaimRun]).
//
// The exit marker is the guest's claim: a program can write it and keep running. A host that
// needs the process gone disposes the sandbox.
package hosttools
