// Package flock takes advisory locks (flock(2)) on files, shared or exclusive, waiting until
// a context ends. Processes on one machine use them to take turns at something they share:
// building one image, using the Docker daemon. The kernel drops a lock with the process that
// held it, so a killed holder never leaves one behind. Without flock (not Unix) a lock is
// granted at once and excludes nothing.
package flock
