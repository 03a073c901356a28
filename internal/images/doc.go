// Package images builds, on the local Docker daemon, the images the engine and the project's
// tests run. No registry can be reached on the build machines, so nothing is pulled: every
// image is made here from files the machine already has.
//
// The busybox workload image ([BusyboxTag]) is a root filesystem holding Debian's statically
// linked busybox, its applet links, a root and a non-root user, imported with docker import.
// [EnsureBusybox] builds it when it is missing and otherwise leaves it alone, so the image
// doubles as a cache between test runs.
//
// The egress proxy image ([ProxyTag]) is FROM scratch around the proxy's static binary: the
// one embedded in this program when `make engine` built it ([EmbeddedProxyPlatforms]), so an
// installed engine needs no source tree and no Go toolchain, or else one built from the
// module's source. The e2e fixture images ([TargetTag], [ClientTag]) are built from source
// only: they are for the tests. The Python workload image ([PythonTag]) and the sshd image that
// plays a remote Docker host ([SSHDTag]) are bootstrapped from Debian with debootstrap
// (debootstrap.go), and rebuilt only when their recipe changes ([LabelInputs]).
//
// Every Ensure function checks and builds while it holds a lock of its tag shared by the
// whole machine (a flock in the temporary directory), so test packages that run side by side
// build an image once: the others wait, then find it current.
package images
