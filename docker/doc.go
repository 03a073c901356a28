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
// # What this package exports and why
//
// Rule: a top-level name is exported only when another package of this module uses it, or when
// an exported signature carries it (the type of [NewEngine]'s options, the type and values of
// [Change].Kind and of the name roles, the class [*CapExceededError] reports). Anything only
// this package uses is unexported, error classes included: a class is exported when a caller
// outside branches on it with errors.Is. TestExportsHaveUsers (exports_test.go) checks the
// rule on every run of the package's tests and lists the signature-carried exceptions.
//
// Go has no friend packages, so the exported names fall into two groups:
//
//   - The embedder's: what code that builds a worker from actors, docker and events writes
//     (README, "Embedding"; cmd/engine's serve.go does the same). [Config], [DefaultConfig]
//     and the defaults they name ([DefaultDriver], [DefaultDockerPath],
//     [DefaultOutboundNetwork], [DefaultEgressSubnetPool], [DefaultCommandTimeout]);
//     [DriverAPI] and [DriverCLI]; [NewEngine] and its [Option]s ([WithLogger], [WithMetrics],
//     [WithTracerProvider]); [Driver], which NewEngine returns and actors.WithEngine takes, and
//     its [Binding]; the egress settings' parsers ([NewSubnetPool], [SubnetPool],
//     [EgressSubnetBits], [ParsePrivateCIDRs], [*PrivateCIDRError]); and the classes an
//     embedder meets from construction and binding ([ErrUnreachable], [ErrClientNotFound],
//     [ErrTimeout], [ErrInvalid]).
//   - The seam's: everything else, used across package boundaries by the engine's own
//     packages (actors, events, reaper, docker/fingerprint, docker/enginetest and the
//     integration tests): the interfaces [Driver] is made of, their request and record types,
//     the create options, names and roles, topology constants and the classes the actors and
//     the reaper branch on. They are exported because those packages need them; an embedder
//     reaches them through actors, not by calling them, and they change with the engine.
//
// docker/internal would hide the seam's names from actors too, and a module-level internal
// package would move the seam out of docker, so the second group stays here, named as such.
//
// # The two drivers, and when to choose the CLI driver
//
// The API driver is the default. Both bind the same way, through the client binary's `docker
// context inspect` (with no client binary, the API driver takes a DOCKER_HOST set without DOCKER_CONTEXT),
// and differ in how they reach the daemon afterwards:
//
//   - The API driver speaks the Engine API itself, over a unix:// or tcp:// endpoint with the
//     context's TLS material. Binding refuses any other scheme (ssh://, npipe://, fd://) with
//     [ErrUnreachable], naming [DriverCLI] (TestAPIDriverBinding's ssh case).
//   - The CLI driver runs the client binary for every call, with --context naming the bound
//     context, and the client dials the endpoint. So it binds a context the API driver
//     refuses, an ssh:// one among them (TestBinding's ssh case); the engine has not been run
//     against a daemon over ssh. It needs the client binary ([ErrClientNotFound] without it),
//     and each call costs a process: about 0.1 s of wall clock and 30 to 50 ms of CPU, which a
//     burst of acquires pays many times over (docs/operations.md, "A burst of acquires").
//
// Choose the CLI driver for a context whose endpoint only the client can dial, or to compare
// the engine with the spec, which states the backend as a catalogue of docker client
// invocations the way the reference drives the client: the CLI driver is that catalogue in
// code, and the API driver is held to it by one suite (docker/enginetest runs on both, and the
// project's second test pass runs the driver-level integration tests on the CLI driver,
// docs/testing.md). It is not the fast path: on this machine its cold acquire is slower than
// the reference's, which also drives the client (docs/benchmarks.md). The Podman CLI is not
// supported by either driver ([Config].DockerPath).
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
