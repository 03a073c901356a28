// Package fingerprint is the Docker fingerprint subject (docker-backend §12.5): the
// engine-side [sandbox.FingerprintSubject] a kind claiming ConfinedToGuestCallPath proves
// its claim with, through [conformance.AssertNothingLeftBehind]. It sits beside the backend
// and needs only the docker package, not the actors: a kind's tests use it directly, and
// engine serve hands a [Factory] to the NATS service, whose fingerprint call gives a host in
// another language the same proof. No other call of the engine uses it.
//
// # What one fingerprint is
//
// On a Linux daemon, one [Subject.Fingerprint] is:
//
//   - one inspect of the workload, refusing a replaced or stopped container, a PID namespace
//     shared with anything, a privileged workload and any writable declared mount;
//   - the engine's root-filesystem change list (`docker diff`, the API's changes endpoint),
//     which on the baseline must be empty but for the sandbox's storage base and its
//     ancestors (see below);
//   - one run of the observer container, from the observer image pinned by ID when the
//     subject was built, joined to the workload's PID namespace with no network, a read-only
//     root and no capability but SYS_PTRACE, removed on every exit path (by the daemon when it
//     exits, and by the subject): the processes' birth identities, the SHA-256 and metadata of
//     every entry of the writable mounts the change list cannot see (/dev, /dev/shm and other
//     tmpfs, the engine-managed /etc/hosts, /etc/hostname and /etc/resolv.conf), and the
//     metadata, ctime included, of every root filesystem entry not beneath another mount;
//   - a second inspect (the container must not have restarted meanwhile) and a second
//     change list.
//
// The changed paths are the union of both change lists, of every mounted entry that differs
// from the baseline (added, removed, or any measured attribute) and of every root filesystem
// entry that does ([observation.SameRootEntry]: a directory by type, mode and owner, anything
// else by every attribute). The walk is what the root filesystem's comparison rests on:
// Docker's naive differ, which every storage driver but overlay2 uses, compares size and
// mtime only, and a call can put both back after rewriting a file; it cannot put back the
// ctime. The three
// engine-managed files, once checked to be the engine's mounts of this container, are
// compared without their ctime, which the engine's archive handling bumps even on a read.
//
// # The storage base
//
// The backend creates a storage base the image lacks (the default /maf-sandbox/work) when it
// acquires the sandbox, so the engine's change list already names it and its new or copied-up
// ancestors before any call. An already changed path can hide a second change to it, so the
// baseline accepts these paths, and only these, when each is a directory by the engine's
// no-follow stat (the archive header: type, mode with its setuid, setgid and sticky bits,
// owner and group). Their paths leave the change lists of both fingerprints; instead the final
// fingerprint stats each again and names it when it is gone or any of those differs. What is
// made, changed or deleted under them is a path of its own in the change list, as anywhere
// else. Like the engine's change list for any directory, the stat carries no mtime: an entry
// made and removed under the base leaves nothing to find. The subject learns the base from the
// container's WorkDir method (actors.Sandbox has it) or [WithStorageBase]; without one, every
// changed path refuses the baseline.
//
// # Refusals and the skip
//
// A refusal is an error, never a fingerprint: [*RefusedError] (errors.Is
// [sandbox.ErrRefused]) for a dirty baseline, writable declared mounts, a shared PID
// namespace, a privileged workload or a replaced container; [*UnreadableError] for a
// measurement that could not be read (an exceeded bound among them, [ErrLimit]). A daemon
// that does not run Linux gives [sandbox.ErrFingerprintUnsupported] on the baseline, which
// the probe reports as a skip; after a baseline it is an error.
//
// A Subject holds its baseline: build one per probe.
package fingerprint
