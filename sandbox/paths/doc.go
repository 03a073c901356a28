// Package paths is the one place guest-path confinement lives (protocol §6). Backends call
// it; nothing else in the project re-implements any of it.
//
// # Grammar
//
// Guest paths are POSIX strings whatever the host OS, so this package uses package path and
// never filepath. A backslash anywhere in a path is refused rather than guessed at, and every
// join follows POSIX semantics: an absolute right-hand side replaces the left ([Join]), then
// the result is normalised ([Normalize]).
//
// # Containment
//
// [ConfineResolve] is the string check every file method runs first: the path, joined onto
// the working directory and normalised, must name the working directory or something below
// it. It knows nothing of the filesystem.
//
// # The ancestor walk
//
// A string that stays inside the working directory can still leave it through a symbolic
// link, and the guest can swap any directory above the working directory as easily as one
// below it. [RefuseSymlinkedAncestors] therefore stats every component from the first below
// "/" down to the target with a [StatFunc] the backend supplies (unconfined, no-follow and not
// answered by the guest), and refuses a link. The per-method policies [ResolveWrite],
// [ResolveRead], [ResolveList] and [ResolveRemove] combine the string check and the walk the
// way protocol §6.3 prescribes for each method; [ResolveReclaim] is the string check of §4.9.
//
// # Other helpers
//
// [HostOwned] is the reach rule of §6.5, and [QuoteArgv] is the POSIX quoting an argv needs
// when it must pass through a shell (§4.3). The engine's tar headers are read by the driver
// (docker/tar.go), the one decoder of them.
package paths
