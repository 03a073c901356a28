// Package docker is the engine driver of the sandbox engine: it speaks to one Docker engine
// either through the docker command-line client (the CLI driver) or through the Engine API over
// the endpoint the bound context resolves to (the API driver). [Config.Driver] picks one and
// [NewEngine] builds it; nothing above this package knows which is speaking.
//
// Status: experimental, pre-1.0. Its API may change or disappear in a later release without
// notice. This is independent third-party work; it is not affiliated with, endorsed by, or a
// product of Docker Inc. or Microsoft.
//
// # What lives here
//
// The package holds no sandbox policy. It offers:
//
//   - [Driver], the one seam the actor engine drives, with two implementations, the CLI and
//     API drivers, that pass one shared suite (docker/enginetest). It is composed of [Engine]
//     (inspect, create, start, remove, pause, unpause, exec, the tar plane, listing and events),
//     [Networks] (allowlist topology), [Inventory] (the reaper), the daemon's EngineID, and the
//     fast paths [ExecStarter] and [TypeStater], which only the API has and which the CLI says
//     it has not;
//   - the names ([ContainerName], [EgressID]) that create, dispose, purge and the reaper must
//     all compute the same way (the labels they share live in package label; this package
//     only refuses configured labels that would collide with them, labels.go);
//   - [CreateSpec] and the [CreateOpt] functions that build the workload's hardening flags;
//   - the tar plane ([BuildTar] and the bounded reader of tar.go) used to copy files in and out.
//
// # Why two drivers
//
// The API driver is the default. The CLI driver is kept because the spec states the backend
// as a catalogue of docker client invocations, the way the reference drives the client: the
// CLI driver is that catalogue in code and the API driver is held to what it does.
// docker/enginetest runs one suite against both (TestEngine), and the project's second test
// pass runs the driver-level integration tests on the CLI driver (docs/testing.md). The API
// driver binds through the client too: its context and endpoint come from `docker context
// inspect`.
//
// # Binding
//
// Both drivers snapshot the process environment when they are constructed and bind the
// client's context and endpoint once, on first use (or on Bind). Every later call names that
// context (CLI) or uses that endpoint and its TLS material (API), so a change of DOCKER_HOST,
// DOCKER_CONTEXT or the client's current context cannot redirect it.
//
// # Errors
//
// Engine answers are classified once into the sentinels of errors.go ([ErrNotFound],
// [ErrConflict], [ErrPaused], [ErrUnreachable], ...): the CLI's stderr in cli_stderr.go, the
// API's errors by their class in api_errors.go. Callers test them with errors.Is; nothing
// outside this package reads error text.
package docker
