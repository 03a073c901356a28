// Package hostfs is the host-local file plane: a running container's filesystem reached
// through its init process's root (/proc/<pid>/root) when the engine runs as root on the
// daemon's own host, with every guest path resolved by openat2(2) from a handle on that root
// under RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS. The kernel refuses a
// link at any component atomically, in the lookup itself, so no guest can swap a checked
// directory for a link between a check and the use: the plane needs no freeze.
//
// A [Root] is attached to one container instance by [Attach], which proves the process is the
// container's (see proof.go) and holds /proc/<pid> open: if that process ends, every later
// call fails with [ErrStale] rather than reaching another process's root.
//
// The protocol's rules are the archive plane's, applied with the same policies
// (sandbox/paths) so the refusals carry the same types: a symlinked ancestor is
// [*sandbox.NotConfinedError], any other non-directory ancestor [*sandbox.NotDirectoryError],
// a read above its cap [*sandbox.TransferCapExceededError] before a byte is read. Kernel
// filesystems (procfs, sysfs and the like) the guest's mount namespace shows are refused:
// the protocol leaves /proc, /sys and /dev outside its contract, and no entry but a regular
// file is ever opened for I/O.
package hostfs
