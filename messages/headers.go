package messages

// Correlation headers. A request may carry [RequestIDHeader] (the engine mints an ID when it
// does not, or when the value is not 1-128 visible ASCII characters) and a W3C
// [TraceparentHeader]. Every reply carries the call's request ID in [RequestIDHeader] and
// echoes a valid traceparent unchanged; exec chunks carry both too.
const (
	RequestIDHeader   = "X-Request-Id"
	TraceparentHeader = "traceparent"
)

// RequestInfoHeader is the header the NATS server sets on a request that crosses a service
// import: a JSON object whose "acc" names the importing account (and, with the import's
// share: true, "user" its user). The server replaces any value the sender set. An engine
// with tenancy learns its caller from it and from nothing else (docs/operations.md#tenancy).
const RequestInfoHeader = "Nats-Request-Info"

// ReasonHeader is the reason a caller gives for a sandbox's lifecycle act (pause, snapshot,
// restore, fork): "operator" from the operator console, which sends it on every call. An
// engine with tenancy believes it from an operator account only; a single-tenant engine, whose
// every caller is trusted alike, believes it from anyone.
const ReasonHeader = "Maf-Sandbox-Reason"
