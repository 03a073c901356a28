// Package images builds, on the local engine, the images the project's tests run. No registry
// can be reached on the build machines, so nothing is pulled: every image is made here from
// files the machine already has.
//
// The only image so far is the busybox workload image ([BusyboxTag]): a root filesystem
// holding Debian's statically linked busybox, its applet links, a root and a non-root user,
// imported with docker import. [EnsureBusybox] builds it when it is missing and otherwise
// leaves it alone, so the image doubles as a cache between test runs.
package images
