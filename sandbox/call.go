package sandbox

import "context"

// Call is what the caller of an act knows of it that the engine does not: an API in front of
// the router (the NATS service) puts it in the context of each call it dispatches, and every
// act reported under that context carries it. An embedded host may set one too.
type Call struct {
	RequestID   string // the call's request ID
	Traceparent string // the caller's W3C traceparent, "" when none
	Account     string // the caller's account, on an API serving several tenants
	Service     string // the API process that took the call
	// Handle names the API's handle of the instance an act concerns: the handle the call
	// named, or the one an acquire's answer will carry. Nil: no handles.
	Handle func(instanceID string) string
}

type callKey struct{}

// WithCall returns ctx carrying c, for the acts reported under it.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallOf returns the call ctx carries; the zero Call when none.
func CallOf(ctx context.Context) Call {
	c, _ := ctx.Value(callKey{}).(Call)
	return c
}

type withinActKey struct{}

// WithinAct returns a context whose calls on a sandbox are parts of a larger act that its
// caller reports itself — a host-tools run writes, reads and execs many times to run one
// program — so the backend reports none of them.
func WithinAct(ctx context.Context) context.Context {
	return context.WithValue(ctx, withinActKey{}, true)
}

// IsWithinAct reports whether ctx's calls are parts of a larger act ([WithinAct]).
func IsWithinAct(ctx context.Context) bool {
	v, _ := ctx.Value(withinActKey{}).(bool)
	return v
}
