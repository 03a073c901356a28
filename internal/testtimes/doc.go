// Package testtimes reads the event streams of go test -json (test2json) and reports where a
// run's time went: each package's time and the slowest top-level tests. make test writes the
// streams (docs/testing.md); .ci/run prints the report at the end of a run.
package testtimes
