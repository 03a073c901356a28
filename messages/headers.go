package messages

// Correlation headers. A request may carry [RequestIDHeader] (the engine mints an ID when it
// does not, or when the value is not 1-128 visible ASCII characters) and a W3C
// [TraceparentHeader]. Every reply carries the call's request ID in [RequestIDHeader] and
// echoes a valid traceparent unchanged; exec chunks carry both too.
const (
	RequestIDHeader   = "X-Request-Id"
	TraceparentHeader = "traceparent"
)
