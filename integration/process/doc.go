// Package process tests the processes of a sandbox (docs/architecture.md, "Processes")
// against a real Docker engine: processes its supervisor owns, started, written to, resized,
// signalled, timed out, killed for memory and waited for through the protocol; their output
// read from any sequence, cut where the buffer no longer holds it, and read again by another
// engine after the first one stopped; and the docker exec processes of a sandbox without a
// supervisor. It holds only tests; they fail, rather than skip, when
// MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package process
