// Package messages is the wire contract of the sandbox protocol on NATS, shared by the
// engine's service and the Go client so that the two ends agree by construction:
//   - the JSON bodies of every request, reply and event (wire.go, hosttools.go,
//     fingerprint.go: the API... names);
//   - every subject and its templates (subjects.go) and the correlation headers (headers.go);
//   - the conversions between those bodies and package sandbox's values (convert.go);
//   - the one table of stable error codes that turns an error into its wire object and back
//     into the same typed error (errors.go), so errors.As and errors.Is work across NATS.
//
// Messages are data, not behaviour: exported structs, always sent and matched as pointers. A
// request that expects a reply is named XxxRequest and gets exactly one XxxResponse whose Err
// field carries the failure; one-way commands are imperative and events are past tense. The
// container actor's own requests are not here: they are unexported types in package actors,
// each with the behaviour of its call.
//
// It imports no NATS client and nothing of the engine but the protocol (package sandbox): the
// service (nats.go/micro) and the client both import it, and neither imports the other.
package messages
