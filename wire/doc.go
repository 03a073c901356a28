// Package wire is the codec of the sandbox protocol on NATS, shared by the engine's service
// and the Go client so that the two ends agree by construction: every subject and its
// templates (subjects.go), the correlation headers (headers.go), the conversions between the
// JSON wire types of package messages and package sandbox's values (convert.go), the reap
// result (reap.go), and the one table of stable error codes that turns an error into its
// wire object and back into the same typed error (errors.go), so errors.As and errors.Is
// work across NATS.
//
// It imports no NATS client: the service (nats.go/micro) and the client both import it, and
// neither imports the other.
package wire
