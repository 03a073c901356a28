package docker

import (
	"errors"
	"io"
	"sync/atomic"
)

// errOverBudget ends a reader whose output budget is spent.
var errOverBudget = errors.New("output budget spent")

// outputBudget is one byte budget shared by stdout and stderr.
type outputBudget struct {
	max  int64
	used atomic.Int64
}

func (b *outputBudget) wrap(r io.Reader) io.Reader {
	if b == nil {
		return r
	}
	return budgetReader{r: r, b: b}
}

type budgetReader struct {
	r io.Reader
	b *outputBudget
}

func (br budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if br.b.used.Add(int64(n)) > br.b.max {
		return n, errOverBudget
	}
	return n, err
}
