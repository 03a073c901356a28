package docker

import (
	"errors"
	"sync/atomic"
)

// errOverBudget ends a reader whose output budget is spent.
var errOverBudget = errors.New("output budget spent")

// outputBudget is one byte budget shared by stdout and stderr.
type outputBudget struct {
	max  int64
	used atomic.Int64
}
