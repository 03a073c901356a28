// Package telemetry holds the integration tests of the engine's metrics: engine serve with
// --metrics-listen, scraped by a real Prometheus server (Debian's prometheus package), whose
// HTTP API the tests query.
package telemetry
