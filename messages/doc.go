// Package messages holds the requests, responses and events that the engine's parts exchange:
// the sandbox handles and the backend adapter send them to container actors, and the NATS
// service carries them to clients in other processes.
//
// Messages are data, not behaviour: exported structs, always sent and matched as pointers. A
// request that expects a reply is named XxxRequest and gets exactly one XxxResponse whose Err
// field carries the failure; one-way commands are imperative and events are past tense.
package messages
