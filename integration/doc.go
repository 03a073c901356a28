// Package integration holds, in its subpackages, the tests that run the engine against a real
// Docker engine, one package per concern so that go test can run two at once:
//
//   - files: the file surface on every plane, its attacks, atomic writes, the host plane
//   - egress: allowlisted egress, the proxy, its attacks, events, scale
//   - cluster: several engines on a NATS cluster, placement and takeover
//   - hosttools: host tools called from Python in a sandbox
//   - lifecycle: acquire, exec, freeze, things changed behind the engine, the reaper
//   - service: the engine over NATS and the engine command
//   - fingerprint: the Docker fingerprint subject and its observer
//
// Their shared helpers are in internal/itest, and each package's TestMain calls itest.Main.
// The tests fail, rather than skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package integration
