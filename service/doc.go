// Package service answers the sandbox protocol on NATS: every router and sandbox operation
// (acquire, exec, write/read/stat file, remove, collect outputs, dispose, dispose scope,
// reap, declarations, health) is an endpoint of the nats micro service [messages.ServiceName]
// taking and returning the JSON wire messages of package messages. The engine speaks micro's
// protocol ($SRV.PING, $SRV.INFO, $SRV.STATS) itself, so that its counters are true for
// calls answered off the subscription's goroutine (endpoints.go). docs/nats-api.md is the reference a client in any language
// needs; package client is the Go client.
//
// # Decode, check, dispatch
//
// Each call is decoded (its size, JSON, type and envelope), checked (admission: the engine's
// and the account's bounds; tenancy: the caller's identity against the scopes, handles and
// subjects it names, tenancy.go) and dispatched to the engine through the layers around the
// router: the placement owner ([placement.Owner], a layer of its own) for acquires, disposals
// and purges, the handle's sandbox for every other call. What the engine does is reported
// where it happens (sandbox.Observer: the router's observer, handed to the backend): the
// service puts only what the NATS edge knows of each call in its context — request ID,
// traceparent, account, this engine's ID, the handle (report.go) — and reports the acts that
// are its own: its states, placement changes, the calls its tenancy refused, a fingerprint's
// verdict, a host-tools run's program and tool calls.
//
// # Subjects and engines
//
// Every subject is a constant of package messages (messages/subjects.go), which the Go client shares.
// Cold calls (acquire, dispose, dispose_scope, reap, declarations, health) go to shared
// subjects answered in one queue group, so several engines can share them; an acquire's reply
// names the engine that holds the sandbox and a handle, and every later call on that sandbox
// goes to that engine's own subjects (…engine.<id>.…), where queue groups are disabled. The
// key of a call always comes from the request envelope the host sends, never from inside a
// command, and a handle is refused under any key but the one it was acquired with.
//
// # Placement
//
// With [WithPlacement] engines sharing NATS keep one sandbox per (key, kind) between them
// (placement.go): a cold acquire claims the sandbox's entry before creating anything, an
// acquire of a sandbox another engine owns is forwarded to it, the engine renews its leases and
// refuses calls on a sandbox whose lease it no longer holds. [WithMembers] announces the engine
// and its load; [Service.LameDuck] stops it taking new sandboxes. Those decisions, the leases
// and the goroutines that keep them are a [placement.Owner]'s, a layer around the router the
// service dispatches to; the service carries the forwards it routes ([placement.Forwarder],
// forward.go).
//
// # Errors
//
// A failed call replies with the response type and an error object {code, message,
// detail}. The code comes from the one table in messages/errors.go, which maps every error type of
// package sandbox (and the contract's own) to a stable string; [messages.DecodeError] rebuilds the
// same typed error, so errors.As and errors.Is work across NATS. The code and message also
// travel in micro's Nats-Service-Error-Code and Nats-Service-Error headers.
//
// # Correlation
//
// Every reply carries the call's request ID in the [messages.RequestIDHeader] header: the caller's,
// or one the engine mints, and echoes a valid W3C [messages.TraceparentHeader]. Every log line of a
// call has its op, subject, request_id, key and handle. An exec's chunks carry its exec_id
// (also in the reply) and the request ID.
//
// # Transfers
//
// A payload that does not fit in one NATS message travels in chunks: a client uploads a
// large file with upload_chunk requests before its write_file, and a large read, exec output
// or artifact comes back as a transfer the client downloads chunk by chunk. Either way the
// receiver checks the size and SHA-256 of the whole before using it, and one file is at most
// 64 MiB.
//
// # Streaming exec
//
// An exec request that names a stream_to subject gets APIExecChunk messages there, then its
// response. A sandbox that implements [sandbox.StreamingExec] hands output over while the command
// runs; for any other the engine publishes the output's chunks when the command ends.
//
// # Shutdown
//
// [Service.Stop] drains: the endpoints stop taking requests, the requests already taken
// finish (bounded by the caller's context), and only then does Stop return.
package service
