// Package files tests the file surface against a real Docker engine, on every file plane: the
// conformance suites, hostile layouts and the reach rule of removals, atomic writes and what a
// crash mid-write leaves, the host plane's proof of its process, the per-file transfer cap
// and outputs collected through the router. It holds only tests; they fail, rather than skip,
// when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package files
