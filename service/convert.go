package service

import (
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/wire"
)

// The conversions between the wire messages and package sandbox's values live in package
// wire (wire/convert.go), which the Go client imports too; these call them under the names
// this package has always given them.

// SpecFromWire is [wire.SpecFromWire].
func SpecFromWire(w messages.APISpec) (sandbox.Spec, error) { return wire.SpecFromWire(w) }

// SpecToWire is [wire.SpecToWire].
func SpecToWire(s sandbox.Spec) messages.APISpec { return wire.SpecToWire(s) }

// OutputsFromWire is [wire.OutputsFromWire].
func OutputsFromWire(ws []messages.APIDeclaredOutput) []sandbox.DeclaredOutput {
	return wire.OutputsFromWire(ws)
}

// OutputsToWire is [wire.OutputsToWire].
func OutputsToWire(os []sandbox.DeclaredOutput) []messages.APIDeclaredOutput {
	return wire.OutputsToWire(os)
}

// KeyFromWire is [wire.KeyFromWire].
func KeyFromWire(w *messages.APIKey) sandbox.Key { return wire.KeyFromWire(w) }

// KeyToWire is [wire.KeyToWire].
func KeyToWire(k sandbox.Key) *messages.APIKey { return wire.KeyToWire(k) }

// StatToWire is [wire.StatToWire].
func StatToWire(st *sandbox.FileStat) *messages.APIFileStat { return wire.StatToWire(st) }

// StatFromWire is [wire.StatFromWire].
func StatFromWire(w *messages.APIFileStat) (*sandbox.FileStat, error) { return wire.StatFromWire(w) }

// FailureToWire is [wire.FailureToWire].
func FailureToWire(f *sandbox.DisposalFailure) *messages.APIDisposalFailure {
	return wire.FailureToWire(f)
}

// FailureFromWire is [wire.FailureFromWire].
func FailureFromWire(w *messages.APIDisposalFailure) *sandbox.DisposalFailure {
	return wire.FailureFromWire(w)
}

// DeclarationsToWire is [wire.DeclarationsToWire].
func DeclarationsToWire(d sandbox.Declarations) messages.APIDeclarations {
	return wire.DeclarationsToWire(d)
}

// DeclarationsFromWire is [wire.DeclarationsFromWire].
func DeclarationsFromWire(w messages.APIDeclarations) sandbox.Declarations {
	return wire.DeclarationsFromWire(w)
}
