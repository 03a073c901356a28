// Package telemetry is the engine's metrics: one set of OpenTelemetry instruments
// ([Metrics]) that the NATS service, the Docker drivers and the Docker backend (package actors) record
// into, made from any
// OpenTelemetry meter provider, and a Prometheus endpoint ([NewPrometheus]) that `engine
// serve --metrics-listen` puts them behind.
//
// Metrics are off unless asked for: a nil *Metrics records nothing and costs one nil check
// per call. The instruments follow the OpenTelemetry semantic conventions where one exists
// (rpc.server.call.duration for an API call, error.type for its refusal code); the rest are
// named maf_sandbox.*. docs/operations.md lists them and how to scrape and alert on them.
package telemetry
