// Package service tests the engine served over NATS against a real Docker engine: every
// operation through the Go client, the shared conformance suites remotely, replies and
// observability, health when the daemon or an image is missing, and the engine command as a
// user runs it (serve, run, reap, demo). It holds only tests; they fail, rather than skip,
// when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package service
