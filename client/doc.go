// Package client is the Go client of the engine's NATS API: [New] returns a
// [sandbox.Backend] whose sandboxes are held by a remote engine, so code written against
// package sandbox runs unchanged whether the engine is embedded or across NATS (the
// conformance suites run through it).
//
// Errors come back as the engine's typed errors: a reply's error code rebuilds the same
// sandbox error type, so errors.As(err, &notConfined) and errors.Is(err, sandbox.ErrRefused)
// work as they do in process. Calls that no engine could take fail with a
// [*messages.EngineUnavailableError] (errors.Is(err, messages.ErrUnavailable)); cold calls are
// retried for a while first, so a client waiting through an engine restart gets an answer.
// A call over its account's bound on an engine serving several tenants fails at once with a
// [*messages.BusyError] (errors.Is(err, messages.ErrBusy)), not retried: nothing ran, and the
// account is served again once one of its calls has finished. Every call is bounded: by ctx's deadline, or else by the call timeout.
//
// A call cut off by a connection drop (this client's, or its engine's: a NATS node killed
// under either) is sent again when running it twice does what running it once does — stat,
// read, list, inline write, remove, acquire (by key), dispose — and otherwise (exec, run_code,
// run_program, reset, …) answers an [*OutcomeUnknownError], never a result: see
// [WithDropRetry] and docs/nats-api.md.
//
// Files larger than one NATS message go in chunks, checked against their SHA-256; an exec
// can stream its output with [Sandbox.ExecStream].
package client
