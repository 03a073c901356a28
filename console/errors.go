package console

import "errors"

// ErrForbidden is returned for an action the console's NATS identity may not publish: the
// server answered its probe or its request with a permissions violation.
var ErrForbidden = errors.New("console: the console's NATS identity may not do this")

// ErrUnanswered is returned for an action no engine answered in time.
var ErrUnanswered = errors.New("console: no engine answered")
