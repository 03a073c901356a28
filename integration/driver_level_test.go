package integration

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/docker"
)

// driverLevel names the tests that run on both engine drivers. make test runs the whole
// package once, on the default driver (the Engine API), and then only these on the CLI driver
// (MAF_SANDBOX_TEST_DRIVER=cli): each goes through a part of the docker.Engine seam whose two
// implementations differ in a way the shared contract suite (docker/enginetest, both drivers
// in one pass) does not hold alone — the freeze and what an exec meets during one, exec
// streaming, cancel and timeout, the tar plane (the archive file plane) under a freeze, the
// egress topology, a daemon that stops answering, and how engine failures are classified.
// Every other test exercises the actors, the router, the service or the proxy above the seam,
// and runs once. docs/testing.md gives the reasons test by test.
func driverLevel() []string {
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
		// A daemon that stops answering, to a backend and to engine serve.
		"TestDaemonUnreachableMidRun",
		"TestServeDaemonUnreachable",
		// How engine failures are classified: a missing image, a name taken, a container gone
		// or changed behind the engine, a probe that fails.
		"TestServiceImageMissing",
		"TestConcurrentAcquiresOfOneKeyMakeOneContainer",
		"TestGoneRemovedBehindTheEngine",
		"TestContainerRemovedBehindTheEnginesBack",
		"TestMissingRmFailsTheProbe",
		// The fingerprint's observer container and the daemon's change list.
		"TestFingerprintCatchesResidue",
		"TestObserverContainerHardenedAndRemovedOnCancel",
		"TestObserverContainerRemovedOnTimeoutAndPanic",
	}
}

// onlyDriverLevelOnTheCLI narrows the run to [driverLevel] on the CLI driver's pass, unless
// the caller chose tests with -run (then theirs are run, on the CLI driver).
func onlyDriverLevelOnTheCLI() {
	if testDriver() != docker.DriverCLI {
		return
	}
	flag.Parse()
	run := flag.Lookup("test.run")
	if run == nil || run.Value.String() != "" {
		return
	}
	if err := run.Value.Set("^(" + strings.Join(driverLevel(), "|") + ")$"); err != nil {
		panic(err) // a list of identifiers is always a valid expression
	}
}

// TestDriverLevelNamesThisPackagesTests keeps the list honest: a name that is not a test of
// this package (renamed, moved, misspelt) would silently drop a test from the CLI pass.
func TestDriverLevelNamesThisPackagesTests(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	isTest := regexp.MustCompile(`^Test[A-Z]`)
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && isTest.MatchString(fn.Name.Name) {
				tests = append(tests, fn.Name.Name)
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range driverLevel() {
		if !slices.Contains(tests, name) {
			t.Errorf("driverLevel names %s, which is not a test of this package", name)
		}
		if seen[name] {
			t.Errorf("driverLevel names %s twice", name)
		}
		seen[name] = true
	}
}
