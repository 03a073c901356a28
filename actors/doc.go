// Package actors is the sandbox engine: a [sandbox.Backend] on plain Docker containers built
// as one protoactor actor per container.
//
// # Structure
//
// A supervisor actor owns one container actor per derived container name. The container
// actor's mailbox is the serialisation the protocol asks for: acquire, freeze → check → copy
// → thaw, exec start, removal and disposal of one container happen one at a time, so "never
// frozen twice at once in the process" follows from the structure. Long execs do not block
// the mailbox: the actor starts them and finishes them in a ReenterAfter continuation. A
// freeze never begins while one of the actor's execs is in flight: on this engine a pause
// that races an exec's start deadlocks the container, so file calls wait for running execs.
// An actor idle for [WithIdleActorTimeout] that holds nothing is stopped (passivated) by the
// supervisor, which spawns the name's next actor only once the old one has terminated.
//
// The engine is reached only through the [docker.Driver] seam, wrapped once in the read
// retries of retry.go. A freeze waits only for the start of an exec in flight, which the
// driver reports (ExecWithStart).
//
// # Files, top-down
//
// Read the files in this order: each layer calls into the ones below it. The Backend and
// containerActor types have methods in every layer (one file per concern), so lower files
// still name them:
//
//   - the backend: backend.go (Backend, NewBackend, Acquire, Close, CheckHealth), backend_opts.go,
//     sandbox.go (the handle, which sends requests), pool.go and pool_binding.go (the warm
//     pool), purge.go, reap.go, instruments.go (span names, metrics)
//   - the supervisor: supervisor.go (one actor per name), watch.go (the event watch),
//     passivate.go (idle actors stopped), sleep.go (idle sandboxes paused, stopped, woken)
//   - the container actor: container.go (its state, Receive, what a request is, its view of
//     the container: current, refresh, removeContainer)
//   - its requests, one file per call: container_acquire.go, container_exec.go,
//     container_files.go, container_write.go, container_remove.go, container_dispose.go,
//     container_gone.go (a call on a gone instance), snapshot.go (take, restore, fork)
//   - what the requests use: egress (egress.go, egress_run.go, egress_topology.go,
//     egress_inspect.go, network_removal.go), files (file_plane.go, stat_memo.go, hostfs/,
//     freeze.go, freeze_marker.go), exec (exec_channel.go), facts (instance_facts.go,
//     image_facts.go), snapshots (snapshot_layer.go, snapshot_store.go)
//   - helpers: retry.go (the driver's read retries), singleflight.go, errors.go (every
//     sentinel and error type, and how an engine error is typed unavailable or busy)
//
// # Status
//
// Experimental, pre-1.0: the API may change without notice. This is independent work for
// Microsoft Agent Framework hosts; neither Docker Inc. nor Microsoft makes, endorses or is
// affiliated with it.
package actors
