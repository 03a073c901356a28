package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errhttp"
	"github.com/moby/moby/client"
)

// This file classifies the Moby client's errors for the [Engine]. It never reads their text: a
// failed connection is the client's own error type, and a daemon answer carries its HTTP status
// as an errdefs class (containerd/errdefs marker methods and sentinels). What the status alone
// cannot tell (409 means "already paused", "not running" and "paused, unpause before exec"
// alike) is decided by the caller from the container's state.

// apiClass is the class every call shares: [ErrUnreachable] for a connection that failed,
// [ErrNotFound] for a 404 answer about the object the call named, nil otherwise.
func apiClass(err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return ErrUnreachable
	case cerrdefs.IsNotFound(err):
		return ErrNotFound
	}
	return nil
}

// answerStatus is the HTTP status of a daemon answer, read back from its errdefs class; 0 when
// err is not an answer (a failed connection, a cancelled call, a client-side error).
func answerStatus(err error) int {
	if err == nil || client.IsErrConnectionFailed(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0
	}
	for _, is := range []func(error) bool{
		cerrdefs.IsNotFound, cerrdefs.IsConflict, cerrdefs.IsInvalidArgument, cerrdefs.IsInternal,
		cerrdefs.IsUnavailable, cerrdefs.IsPermissionDenied, cerrdefs.IsUnauthorized,
		cerrdefs.IsNotImplemented, cerrdefs.IsNotModified, cerrdefs.IsFailedPrecondition,
		cerrdefs.IsAlreadyExists, cerrdefs.IsResourceExhausted,
	} {
		if is(err) {
			return errhttp.ToHTTP(err)
		}
	}
	return 0
}

// apiFailure is the [*CommandError] of a daemon answer to the call args names (as the docker
// command it stands for): ExitCode carries the answer's HTTP status (0 when no answer came back) and Stderr the
// client's message, "Error response from daemon: …".
func apiFailure(args []string, err error, class error) *CommandError {
	return &CommandError{Args: args, ExitCode: answerStatus(err), Stderr: []byte(err.Error()), Class: class}
}

// apiError is the error of a failed call: a connection failure is [ErrUnreachable] (never an
// absence), anything else a [*CommandError] whose class is class, or apiClass's when class is
// nil.
func apiError(args []string, err error, class error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("%w: docker %s: %w", ErrUnreachable, renderArgs(args), err)
	}
	if class == nil {
		class = apiClass(err)
	}
	return apiFailure(args, err, class)
}

// isAnswer reports whether err is a daemon answer (an HTTP status), not a failure to talk.
func isAnswer(err error) bool { return answerStatus(err) != 0 }

// apiAnswer is a daemon answer to a request the API wrote itself (the exec start, a network
// create): its HTTP status, read as an errdefs class (Is), and its message.
type apiAnswer struct {
	status  int
	message string
}

func (e *apiAnswer) Error() string { return "Error response from daemon: " + e.message }

// Is reports the answer's errdefs class.
func (e *apiAnswer) Is(target error) bool { return errors.Is(errhttp.ToNative(e.status), target) }

// readAnswer reads a refusal's message (the engine's {"message": …}, or its text) into an
// [*apiAnswer], at most 64 KiB of it.
func readAnswer(resp *http.Response) *apiAnswer {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var doc struct {
		Message string `json:"message"`
	}
	text := strings.TrimSpace(string(msg))
	if json.Unmarshal(msg, &doc) == nil && doc.Message != "" {
		text = strings.TrimSpace(doc.Message)
	}
	return &apiAnswer{status: resp.StatusCode, message: text}
}

// pauseClass is the class of a daemon's refusal of pause, from the container's state after
// it: [ErrPaused] when paused, [ErrNotRunning] when not running, and [ErrFreezeFailed] for an
// internal error (500) on a running, unpaused container, which is the freezer giving up on a
// busy guest; nil otherwise.
func pauseClass(err error, paused, running bool) error {
	switch {
	case paused:
		return ErrPaused
	case !running:
		return ErrNotRunning
	case cerrdefs.IsInternal(err):
		return ErrFreezeFailed
	}
	return nil
}
