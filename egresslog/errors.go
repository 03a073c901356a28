package egresslog

import "errors"

// ErrInvalidDecision is returned by [FormatDecision] and [Writer.WriteDecision] for a decision
// that the grammar cannot carry: an unknown verb, an empty host, a host holding a byte outside
// 0x21–0x7E (a space or line feed would forge or split a line), or a port outside 1–65535.
var ErrInvalidDecision = errors.New("egresslog: invalid decision")

// ErrInvalidInspect is returned by [ParseInspect] for a value of [EnvInspect] that is not a
// list of inspecting rules in [sandbox.EgressRule.Canonical] form.
var ErrInvalidInspect = errors.New("egresslog: invalid inspecting rules")
