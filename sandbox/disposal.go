package sandbox

import "strings"

// DisposalFailure says a disposal may have left something behind. A nil failure means
// "nothing reported", not proof of deletion. Detail is for logs and is never parsed.
type DisposalFailure struct {
	Code   DisposalCode
	Detail string
}

func (f *DisposalFailure) Error() string { return "disposal " + string(f.Code) + ": " + f.Detail }

// ScopePurge is the result of disposing a conversation's sandboxes.
type ScopePurge struct {
	Disposed   int
	Undisposed *DisposalFailure
}

// FoldDisposalFailures folds failures into one: nil for none; the code is the first of
// unreachable, timeout, refused, unlisted, unknown present (an unrecognised code counts as
// unknown); the details are joined with "; ".
func FoldDisposalFailures(failures []DisposalFailure) *DisposalFailure {
	if len(failures) == 0 {
		return nil
	}
	best := len(DisposalCodes()) - 1
	details := make([]string, 0, len(failures))
	for _, f := range failures {
		if r := rankOf(f.Code, DisposalCodes()); r >= 0 && r < best {
			best = r
		}
		details = append(details, f.Detail)
	}
	return &DisposalFailure{Code: DisposalCodes()[best], Detail: strings.Join(details, "; ")}
}

// DisposeOptions narrows a disposal. The zero value disposes every kind of the key.
type DisposeOptions struct {
	Kind       *string // only this kind
	InstanceID string  // only this physical instance
}
