// Package messages holds the requests, responses and events that the engine's parts exchange:
// the sandbox handles and the backend adapter send the in-process ones to container actors
// (container.go), and the NATS service and client exchange the JSON wire types (wire.go,
// the API... names).
//
// Messages are data, not behaviour: exported structs, always sent and matched as pointers. A
// request that expects a reply is named XxxRequest and gets exactly one XxxResponse whose Err
// field carries the failure; one-way commands are imperative and events are past tense.
package messages
