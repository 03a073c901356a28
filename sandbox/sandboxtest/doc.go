// Package sandboxtest is an in-memory fake of the sandbox protocol (protocol §15), for tests
// only: production code never imports it.
//
// [Sandbox] keeps a store of regular files (bytes keyed by absolute guest path), directories,
// symbolic links (with their targets, never followed) and "other" entries, and implements
// every [sandbox.Sandbox] method over it with the shared policies of package
// sandbox/paths, using an unconfined, no-follow stat of its own store. Check and operation
// happen under one lock, so the fake has no residual race. Exec and RunCode run nothing: they
// answer with the first [Script] whose Match is a substring of the command text (an argv is
// matched and recorded as its POSIX-quoted join) and record each call.
//
// [Backend] hands out one Sandbox for every key and records the keys and specs it was asked
// for and the disposals it was asked to make. Its defaults are the name "fake", isolation
// none, egress {allowlist, closed} and the default capability set; [New]'s options change
// them.
//
// The fake proves shape, not safety: its links lead nowhere and it runs no guest. Seeding
// ([Sandbox.AddFile], [Sandbox.AddDir], [Sandbox.AddSymlink], [Sandbox.AddOther]) plays the
// image and the guest; it bypasses the protocol and panics on a contradictory store, since
// that is a bug in the test.
package sandboxtest
