// Package messages holds the wire types the NATS service and client exchange: the JSON
// bodies of every request, reply and event (wire.go, the API... names). The container
// actor's own requests are not here: they are unexported types in package actors, each with
// the behaviour of its call.
//
// Messages are data, not behaviour: exported structs, always sent and matched as pointers. A
// request that expects a reply is named XxxRequest and gets exactly one XxxResponse whose Err
// field carries the failure; one-way commands are imperative and events are past tense.
package messages
