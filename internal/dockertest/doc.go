// Package dockertest is what tests use to reach the real Docker engine: a check that the
// daemon answers, the busybox workload image, the docker CLI, containers that remove
// themselves, and the labels by which leftovers are found and swept. It is test code; only
// tests import it.
//
// # The daemon
//
// [Require] asks the daemon itself for its version. When it does not answer, the test is
// skipped, or fails when the environment sets MAF_SANDBOX_REQUIRE_DOCKER=1 (as CI does), so
// that a CI run without Docker cannot pass by skipping.
//
// # Labels and cleanup
//
// Every container and network a test creates carries [Labels]: [LabelSession] names the
// whole go test run and [LabelProcess] the test binary of one package. The test registers
// its removal with t.Cleanup before it checks whether the create succeeded, as
// [RunContainer] does. A package's TestMain calls [Main], which afterwards removes whatever
// still carries this process's labels and reports it: a leak is a bug, but it must not leave
// the engine dirty.
//
// # Sharing the daemon
//
// [Main] registers the test binary as a user of the daemon before its tests, and [Alone]
// gives a test the daemon to itself among the registered binaries: it waits for the others
// to finish and keeps new ones from starting until the test ends. Both use flock(2) on files
// in the temporary directory, which the kernel releases when a process dies.
//
// No state is kept between calls: each helper asks the engine again.
package dockertest
