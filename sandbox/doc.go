// Package sandbox is the maf-sandbox protocol: the vocabulary (isolation ladder, egress modes,
// capabilities), the value types ([Key], [Spec], [ExecResult], [FileStat]), the [Sandbox] and
// [Backend] contracts, the [Router]'s admission policy, output collection and the protocol's
// typed errors.
//
// # Errors
//
// Every error the protocol names is a struct type usable with errors.As, and belongs to one of
// the family sentinels ([ErrRefused], [ErrUnsupported], [ErrInvalid], [ErrOS], [ErrOutput],
// [ErrTimeout]) usable with errors.Is.
//
// The package imports nothing of the project; path confinement lives in sandbox/paths.
package sandbox
