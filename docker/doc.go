// Package docker is the engine driver of the sandbox engine: it speaks to one Docker engine
// through the docker command-line client and nothing else.
//
// Status: experimental, pre-1.0. Its API may change or disappear in a later release without
// notice. This is independent third-party work; it is not affiliated with, endorsed by, or a
// product of Docker Inc. or Microsoft.
//
// # What lives here
//
// The package holds no sandbox policy. It offers:
//
//   - [Engine], the narrow seam the actor engine drives (inspect, run, start, remove, pause,
//     unpause, exec, the tar plane, listing and events), and [CLI], its implementation over the
//     docker client binary;
//   - the names ([ContainerName], [EgressID]) and labels ([LabelValue], [WorkloadLabels],
//     [KeyFilter]) that create, dispose, purge and the reaper must all compute the same way;
//   - [CreateSpec] and the [CreateOpt] functions that build the workload's hardening flags;
//   - the tar plane ([BuildTar], [ReadEntry]) used to copy files in and out.
//
// # Binding
//
// A [CLI] snapshots the process environment when it is constructed and binds the client's
// context and endpoint once, on first use (or on [CLI.Bind]). Every later command names that
// context explicitly, so a change of DOCKER_HOST, DOCKER_CONTEXT or the client's current
// context cannot redirect it.
//
// # Errors
//
// Engine answers are classified once, in one place, into the sentinels of errors.go
// ([ErrNotFound], [ErrConflict], [ErrPaused], [ErrUnreachable], ...). Callers test them with
// errors.Is and read detail with errors.As on [*CommandError]; nothing outside this package
// needs to read the client's stderr.
package docker
