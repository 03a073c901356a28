package telemetry

import (
	"errors"
	"fmt"
)

// ErrOption is wrapped by every error a bad option or argument causes.
var ErrOption = errors.New("telemetry: bad option")

var errNoProvider = fmt.Errorf("%w: a meter provider is required", ErrOption)
