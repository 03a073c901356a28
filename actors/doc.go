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
// retries of retry.go; nothing here knows whether the CLI or the Engine API speaks, only
// whether the driver offers a fast path (ExecStarter, TypeStater) or says it has none.
//
// # Status
//
// Experimental, pre-1.0: the API may change without notice. This is independent work for
// Microsoft Agent Framework hosts; neither Docker Inc. nor Microsoft makes, endorses or is
// affiliated with it.
package actors
