// Package itest is what the integration packages share: backends and keys on the test
// labels ([NewBackend], [NewKey], [BusyboxSpec], [Acquire]), the file planes a test runs over
// ([OnEveryPlane]), a backend served over NATS ([StartNATSEngine]), the engine command
// ([StartServe]), a relay in front of the daemon's socket ([Relay]), an engine wrapper that
// counts calls ([NewCountingBackend]) and derived images ([DerivedImage]). It is test code;
// only the integration tests import it.
//
// # Drivers
//
// [Driver] is the engine driver of the run (MAF_SANDBOX_TEST_DRIVER). make test runs every
// package on the default driver, then only the tests [DriverLevel] names on the CLI driver:
// [Main], each package's TestMain, narrows that pass to them, so a package that holds none
// runs nothing there.
package itest
