// Package conformance is the shared suite every sandbox backend must answer (protocol §14).
// It is test support: production code never imports it. It imports no test framework either,
// so a backend's own tests call it from whatever harness they use and read the verdict as an
// error.
//
// # Running a suite
//
// Each suite attacks a real, already acquired sandbox through its public surface only. The
// seam is a [Subject]: the sandbox, its absolute working directory, the capabilities the
// backend really declares, and the two moves the protocol has no method for, planting a file
// and planting a link (making a link is the guest's move, so a sandbox never offers it).
// [PosixGuestSubject] fills that seam for a POSIX guest whose image carries sh, ln, mkdir and
// test.
//
//	subject, err := conformance.NewPosixGuestSubject(sb, "/maf-sandbox/work", backend.Declarations().Capabilities)
//	results, err := conformance.AssertFilesOutConformance(ctx, subject)
//
// The suites are [AssertFilesOutConformance], [AssertFilesInConformance],
// [AssertFilesDeleteConformance], [AssertReclaimConformance], [AssertStorageBaseConformance]
// and [AssertExecConformance].
// Run EXEC last, or on a sandbox of its own: its final probe lets a command overrun its
// timeout, and a backend may discard the whole sandbox to stop it (Docker does).
// [MeasureFilesDeleteProbes] runs the delete probes with no required capability and no verdict, for a
// backend that implements Remove without declaring files_delete yet.
//
// # Verdicts
//
// A suite whose required capability the subject does not declare fails with
// [*sandbox.InvalidArgumentError] before anything is planted: a run that skipped every probe
// would read as a pass having attacked nothing. Otherwise every probe runs, even after others
// failed, and each gives one [Result]. A probe that needs another capability the subject does
// not declare is skipped ("backend does not declare files_list"); callers check skips, since
// a skip is not a pass. A probe fails when its check does not hold, when a refusal comes from
// the wrong error family, or when anything it calls fails unexpectedly ("raised <type>:
// <message>"). When any probe failed, the Assert functions return a
// [*sandbox.ConformanceFailure] naming every failed probe with its reason and why it is in
// the suite.
//
// # Nothing left behind
//
// [AssertNothingLeftBehind] is the probe a kind claiming ConfinedToGuestCallPath owes
// (protocol §14.8). Its seam is a [sandbox.FingerprintSubject], which an engine fills from its own
// side (the Docker one is in package docker/fingerprint): a baseline [sandbox.Fingerprint] of a fresh
// sandbox, the kind's real call plus its cleanup, a final fingerprint, and a failure naming
// every changed path and every program left running or replaced. An engine the subject
// cannot measure gives one skipped result, so a caller asserting that every result passed
// never mistakes it for proof.
//
// # What a pass proves
//
// The probes prove the backend's real behaviour against the layout they planted, and nothing
// about layouts they did not. The FILES_IN, EXEC and FILES_DELETE probes verify through
// Exec (cat, test, printf, pwd, sleep, mkdir, rm), because a backend without a pull surface
// still owes those capabilities; what they measure is the guest the image ships. The reach
// probe of FILES_IN is only sharp against a non-root guest that owns its working directory:
// where the guest is root, its authority and the backend's are one and the probe passes with
// nothing to distinguish.
package conformance
