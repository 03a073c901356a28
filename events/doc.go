// Package events is the engine's event plumbing on NATS (egress-and-reap.md §3.6–3.7,
// docs/events.md): what the events are, how they are delivered, and the recovery that makes
// egress windows exactly once across engine failures.
//
// # Embedding
//
// [Events] implements the engine's observer seam (sandbox.Observer): every act the router, the
// backend and the API report, where it happens, becomes its event here (observe.go). [New]
// takes a NATS connection and owns everything else: the publisher and the JetStream streams,
// the [Outbox] in front of them, the [PendingStore] and its recovery loop. A Go worker that
// embeds the engine builds it exactly as engine serve does:
//
//	b, err := actors.Create(ctx, cfg)                                 // the backend: the events' daemon
//	ev, err := events.New(ctx, nc, events.WithDaemon(b), events.WithLogger(log))
//	router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer),
//		sandbox.WithObserver(sandbox.Observers(ev, metrics)))      // handed on to the backend
//	...                                                               // acquire, exec, files, dispose, reap
//	b.Close(ctx)                                                      // the windows it still drains reported
//	err = ev.Close(ctx)
//
// and gets the same events, with the same delivery and the same recovery, as engine serve: a
// service in front of the router adds only what the NATS edge knows of each call (its request
// ID, trace, account and handle, in the context) and the acts that are its own.
//
// # The events
//
// A window (sandbox.EgressWindow) reported observed becomes an [EgressObservedEvent]
// ([EgressEvent]) and a sweep (sandbox.ReapResult) a [ReapCompletedEvent] ([ReapEvent]);
// [EgressMessage] and [ReapMessage] encode them as a [Message] with its subject ([Token],
// [EgressSubject], [ReapSubject]), ID and type. A host-tool call is a [HostToolCalledEvent].
// Every act of the engine (an acquire, a command, a file crossing, a disposal, the engine's
// own states) is an [AuditEvent] on [StreamAudit], subjects [AuditSubject]; [AuditMessage]
// encodes one. Every payload is spelled in snake_case, as the NATS API is (schema version 2).
// Building an event needs no connection.
//
// # Delivery
//
// A [Publisher] sends one [Message], either on core NATS ([CorePublisher]) or to the
// JetStream streams [StreamEgress] and [StreamOps] ([JetStreamPublisher], which creates them
// and waits for each acknowledgement). An [Outbox] in front of a publisher keeps events in a
// bounded in-memory queue and retries them, in order and with the same ID, for as long as
// NATS is away or a stream refuses to store them (counted as blocked). Egress windows are recorded in the [PendingStore] before their proxy's
// removal and forgotten once the stream acknowledged them; the recovery ([Events.Recover])
// publishes a record whose proxy the daemon confirms absent. Audit events have an outbox of
// their own ([WithAuditOutbox]), so they never crowd a window out. Host-tool calls go out on
// core NATS at best effort.
//
// Refusals of the event itself match [ErrInvalidEvent] with errors.Is; the errors of delivery
// are [ErrNotConnected], [ErrStreamRefused], [ErrOutboxFull], [ErrOutboxClosed] and
// [ErrUndelivered].
//
// # Why a separate package
//
// The egress proxy binary (cmd/proxy), which runs in every egress container, links egresslog
// for its environment and the decision-log grammar and has no use for NATS. Events need the
// NATS client (and a backoff library), so they live here, where the proxy never looks. A test
// in cmd/proxy fails if the proxy's dependencies ever include a nats-io module or this package.
package events
