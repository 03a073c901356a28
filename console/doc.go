// Package console is the operator console's server: one NATS client, under the operator's
// identity, that watches the engine pool and serves one web page about it.
//
// # What it watches
//
// It subscribes once, whatever the number of browser tabs: to the audit stream
// (<event prefix>.audit.>), the egress windows (<event prefix>.egress.observed.>) and the
// reap summaries (<event prefix>.reap.completed), all as core NATS subscriptions that see
// what the engines publish to JetStream from the moment the console starts. Every poll
// interval it asks the engines' stats ($SRV.STATS.maf-sandbox-engine) and each engine's
// health, and it
// lists each newly seen engine's sandboxes with list_sandboxes (then again every
// reconcile interval); audit events keep that list current in between. It keeps a bounded
// window of events in memory ([WithWindow]) and fans every change out to the browsers over
// server-sent events.
//
// # What it does
//
// Disposing an exact instance and purging a conversation are ordinary API calls
// (dispose, dispose_scope on the shared subjects, lame_duck on an engine's own) under the
// console's NATS identity, so NATS permissions decide. Every call — the polls, the probes, the
// actions — goes through the project's Go client (package client, built without the pool's
// declarations), the one request path of the API. At start the console probes each action's
// subject with the client's probe, a request every engine refuses as a bad request before it
// acts: an identity that may not publish there gets a permissions violation from the server
// (nats.ErrPermissionViolation, which ends the probe or action in flight: they run one at a
// time), and the page greys that action; the console refuses it too. No action goes around
// the API, and nothing is decided on an error's text.
package console
