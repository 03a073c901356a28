package dockertest

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB whose Fatal and Skip methods record the outcome and end the
// calling goroutine, as the real ones do, without failing or skipping the test it wraps.
// Everything else, Cleanup and TempDir among them, goes to the wrapped test.
type recorder struct {
	testing.TB
	outcome string // "fatal", "skip", or "" when the function returned
	msg     string
}

// run calls f with r on a new goroutine and waits until f returns or r ends it.
func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func (r *recorder) end(outcome, msg string) {
	r.outcome, r.msg = outcome, msg
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any)                 { r.end("fatal", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.end("fatal", fmt.Sprintf(format, args...)) }
func (r *recorder) FailNow()                          { r.end("fatal", "") }
func (r *recorder) Skip(args ...any)                  { r.end("skip", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.end("skip", fmt.Sprintf(format, args...)) }
func (r *recorder) SkipNow()                          { r.end("skip", "") }
