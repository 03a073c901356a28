// Package telemetry is the engine's metrics: one set of OpenTelemetry instruments
// ([Metrics]), made from any OpenTelemetry meter provider, and a Prometheus endpoint
// ([NewPrometheus]) that `engine serve --metrics-listen` puts them behind.
//
// The engine's acts — acquires, commands, egress decisions, placement leases — are counted by
// [Metrics] as an observer of them (sandbox.Observer, observe.go), beside the events: the
// router hands it to the backend, so an embedded worker and engine serve count the same
// things. What is not an act is recorded directly: the NATS service's API calls and the
// sandboxes and leases it holds, the Docker drivers' daemon calls, the backend's freezes and
// warm pool.
//
// Metrics are off unless asked for: a nil *Metrics records nothing and costs one nil check
// per call. The instruments follow the OpenTelemetry semantic conventions where one exists
// (rpc.server.call.duration for an API call, error.type for its refusal code); the rest are
// named maf_sandbox.*. docs/operations.md lists them and how to scrape and alert on them.
package telemetry
