// Package natspub delivers the events package egresslog builds to NATS (egress-and-reap.md
// §3.6–3.7): a [Publisher] sends one [egresslog.Message], either on core NATS
// ([CorePublisher]) or to the JetStream streams [StreamEgress] and [StreamOps]
// ([JetStreamPublisher], which creates them and waits for each acknowledgement), and an
// [Outbox] in front of a publisher keeps events in a bounded in-memory queue and retries them,
// in order and with the same ID, for as long as NATS is away.
//
// A window becomes a message in egresslog ([egresslog.Window.Event],
// [egresslog.EgressMessage]); [Outbox.EnqueueWindow] does both and enqueues the result.
// Refusals of the event itself match [egresslog.ErrInvalidEvent] with errors.Is; the errors
// of delivery ([ErrNotConnected], [ErrOutboxFull], [ErrOutboxClosed]) are this package's.
//
// # Why a separate package
//
// The egress proxy binary (cmd/proxy), which runs in every egress container, links egresslog
// for the decision-log grammar it writes and has no use for NATS. Delivery needs the NATS
// client (and a backoff library), so it lives here, where only the engine (cmd/engine)
// imports it, and the proxy links only the grammar. A test in cmd/proxy fails if the proxy's
// dependencies ever include a nats-io module again.
package natspub
