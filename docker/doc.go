// Package docker is the engine driver of the sandbox engine: [Engine] speaks the Docker Engine
// API to one Docker engine, at the endpoint the docker client's context resolves to, and
// [NewEngine] builds it.
//
// Status: experimental, pre-1.0. Its API may change or disappear in a later release without
// notice. This is independent third-party work; it is not affiliated with, endorsed by, or a
// product of Docker Inc. or Microsoft.
//
// # What lives here
//
// The package holds no sandbox policy. It offers:
//
//   - [Engine], and [Driver], what the actor engine asks of it: [Containers] (inspect, create,
//     start, remove, pause, unpause, exec, the tar plane, listing and events), [Networks]
//     (allowlist topology), [Inventory] (the reaper), the daemon's ID and security options,
//     the exec that reports its process's start, and the kind-only stat. Driver is an
//     interface so that the actors' tests can drive a fake daemon; [Fingerprinting] is the
//     fingerprint subject's part;
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
//     and the defaults they name ([DefaultDockerPath], [DefaultOutboundNetwork],
//     [DefaultEgressSubnetPool], [DefaultCommandTimeout]); [NewEngine], its [Option]s
//     ([WithLogger], [WithMetrics], [WithTracerProvider]) and the [Engine] it returns, which
//     actors.WithEngine takes as a [Driver], and its [Binding]; the egress settings' parsers
//     ([NewSubnetPool], [SubnetPool], [EgressSubnetBits], [ParsePrivateCIDRs],
//     [*PrivateCIDRError]); and the classes an embedder meets from construction and binding
//     ([ErrUnreachable], [ErrClientNotFound], [*SSHError], [ErrTimeout], [ErrInvalid]).
//   - The seam's: everything else, used across package boundaries by the engine's own
//     packages (actors, events, reaper, docker/fingerprint and the integration tests): the
//     interfaces [Driver] is made of, their request and record types, the create options,
//     names and roles, topology constants and the classes the actors and the reaper branch
//     on. They are exported because those packages need them; an embedder reaches them
//     through actors, not by calling them, and they change with the engine.
//
// docker/internal would hide the seam's names from actors too, and a module-level internal
// package would move the seam out of docker, so the second group stays here, named as such.
//
// # Binding and endpoints
//
// [NewEngine] snapshots the process environment, and the engine binds the client's context and
// endpoint once, on first use (or on [Engine.Bind]), by running the docker client's `docker
// context inspect` (section 3 of the spec) with that snapshot: the only command the engine
// runs with the client binary. With no client binary it takes a DOCKER_HOST set without
// DOCKER_CONTEXT. Every later call uses that endpoint and the TLS material loaded at binding, so
// a change of DOCKER_HOST, DOCKER_CONTEXT, PATH or the client's current context cannot redirect
// it; a named context that is deleted or pointed elsewhere afterwards is refused
// ([ErrUnreachable]), never followed. The endpoints it dials:
//
//   - unix:// — Docker Engine rootful (/var/run/docker.sock) and rootless
//     ($XDG_RUNTIME_DIR/docker.sock), Docker Desktop, and the Docker-compatible sockets of
//     Colima, OrbStack, Rancher Desktop and Podman;
//   - tcp:// — with the context's TLS material (its CA as the only root, its client key pair),
//     or the default context's from DOCKER_CERT_PATH and DOCKER_TLS_VERIFY, and the proxy of
//     the captured environment;
//   - ssh://[user@]host[:port][/socket] — one `ssh` process per connection, found on the
//     captured PATH, running `docker system dial-stdio` on the remote host (dial_ssh.go). ssh
//     runs in batch mode: keys, known hosts and multiplexing are the user's ssh configuration,
//     and an unknown host key is refused, never asked. A failure is an [*SSHError]
//     ([ErrUnreachable]; [ErrClientNotFound] too when the remote host has no docker).
//
// npipe:// and fd:// are refused at binding ([ErrUnreachable]). No connection or ssh process
// outlives the call that opened it.
//
// # Errors
//
// Engine answers are classified once, by their HTTP status class (api_errors.go), into the
// sentinels of errors.go ([ErrNotFound], [ErrConflict], [ErrPaused], [ErrUnreachable], ...);
// a status that means several things is settled by the container's state. Callers test them
// with errors.Is; nothing outside this package reads error text, and inside it only the
// answers the engine gives in words alone (exec_answers.go, the subnet overlap of
// api_network.go).
package docker
