// Package execchan tests the exec channel (docs/architecture.md, "The exec channel") against
// a real Docker engine: a command run through the sandbox's supervisor gets every field
// docker exec would give it, and a root guest that kills, replaces, impersonates, floods or
// stalls the supervisor gets the engine to fall back to docker exec or to refuse with a typed
// error, within its bounds, touching nothing outside the sandbox. It holds only tests; they
// fail, rather than skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package execchan
