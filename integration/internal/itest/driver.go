package itest

import (
	"flag"
	"os"
	"strings"

	"github.com/mafsandbox/engine/docker"
)

// Driver is the engine driver the suite runs on: MAF_SANDBOX_TEST_DRIVER (cli or api),
// empty for the default. make test runs the suite on the default driver, then its
// [DriverLevel] tests on the CLI driver.
func Driver() string { return os.Getenv("MAF_SANDBOX_TEST_DRIVER") }

// DriverLevel names the tests that run on both engine drivers. make test runs the whole
// suite once, on the default driver (the Engine API), and then only these on the CLI driver
// (MAF_SANDBOX_TEST_DRIVER=cli): each goes through a part of the docker.Engine seam whose two
// implementations differ in a way the shared contract suite (docker/enginetest, both drivers
// in one pass) does not hold alone — the freeze and what an exec meets during one, exec
// streaming, cancel and timeout, the tar plane (the archive file plane) under a freeze, the
// egress topology, a daemon that stops answering, and how engine failures are classified.
// Every other test exercises the actors, the router, the service or the proxy above the seam,
// and runs once. docs/testing.md gives the reasons test by test.
func DriverLevel() []string {
	return []string{
		// The freeze, and what an exec or a file call meets during one.
		"TestFreezeBusyGuest",
		"TestExecsInterleavedWithFreezesAreNeverRefused",
		"TestContainerPausedBehindTheEnginesBack",
		"TestTakeoverThawsTheFreezeItsDeadOwnerLeft",
		// Exec: output fidelity, streaming, cancel, timeout.
		"TestExecFidelity",
		"TestStreamingExec",
		"TestStreamingExecWithinBudget",
		"TestCancelledExecKeepsTheSandbox",
		"TestExecTimeoutDiscardsTheSandbox",
		// The tar plane under a freeze: the file surface and its attacks on the archive plane.
		"TestAcquireExecFilesDispose",
		"TestConformance",
		"TestHostileLayoutsAreRefused",
		"TestOversizedReadRefusedOnHeader",
		"TestPerFileCeilingInTheBackend",
		// The egress topology: networks, the proxy, the gate, their removal and their reaping.
		"TestEgressTopologyOnThisDaemon",
		"TestEgressAllowlist",
		"TestEgressGateRunsTheImagesOwnCommand",
		"TestEgressGateReleasesARestartedWorkload",
		"TestDisposeEgressByInstanceRemovesProxyAndNetwork",
		"TestReapByAge",
		"TestReapNeverForcesANetwork",
		// Request-level egress: the credential's secret travels to the proxy off every command
		// line (the CLI driver puts it in the client's environment), and the attacks.
		"TestEgressCredentialSwappedAtTheBoundary",
		"TestEgressInspectAttacks",
		// A daemon that stops answering, to a backend and to engine serve.
		"TestDaemonUnreachableMidRun",
		"TestServeDaemonUnreachable",
		"TestBusyDaemonAtAcquireIsRetryable",
		// How engine failures are classified: a missing image, a name taken, a container gone
		// or changed behind the engine, a probe that fails.
		"TestServiceImageMissing",
		"TestConcurrentAcquiresOfOneKeyMakeOneContainer",
		"TestGoneRemovedBehindTheEngine",
		"TestContainerRemovedBehindTheEnginesBack",
		"TestMissingRmFailsTheProbe",
		"TestExecTheRuntimeCouldNotStart",
		// The exec channel: the supervisor copied in and named by the inspect each driver
		// reads, docker exec as each driver runs it when the channel is refused.
		"TestExecChannelGivesWhatDockerExecGives",
		"TestExecChannelReportsWhatDockerExecReports",
		"TestExecChannelRefusesALinkToAHostSocket",
		"TestExecChannelRefusesAnImpersonator",
		// The fingerprint's observer container and the daemon's change list.
		"TestFingerprintCatchesResidue",
		"TestObserverContainerHardenedAndRemovedOnCancel",
		"TestObserverContainerRemovedOnTimeoutAndPanic",
		"TestObserverIsAutoRemoved",
		"TestObserverLeftByAKilledEngineIsReaped",
		"TestReapTakesLeftoverObservers",
	}
}

// onlyDriverLevelOnTheCLI narrows the run to [DriverLevel] on the CLI driver's pass, unless
// the caller chose tests with -run (then theirs are run, on the CLI driver).
func onlyDriverLevelOnTheCLI() {
	if Driver() != docker.DriverCLI {
		return
	}
	flag.Parse()
	run := flag.Lookup("test.run")
	if run == nil || run.Value.String() != "" {
		return
	}
	if err := run.Value.Set("^(" + strings.Join(DriverLevel(), "|") + ")$"); err != nil {
		panic(err) // a list of identifiers is always a valid expression
	}
}
