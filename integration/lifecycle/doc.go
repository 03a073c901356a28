// Package lifecycle tests a sandbox's life against a real Docker engine: acquire (images,
// their facts and users), exec with streaming, cancel and timeout, the freeze, a container
// paused, removed or replaced behind the engine's back, a daemon that stops answering, bad
// input refused before the engine, and the reaper. It holds only tests; they fail, rather than
// skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package lifecycle
