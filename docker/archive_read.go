package docker

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// archiveRead is one read of a guest path's archive (the archive GET, `docker cp
// <target>:<path> -`): the header alone for a stat (maxBytes < 0), else the header and, for a
// regular file no larger than maxBytes, its body. What is checked before the engine and what
// the stream's reading means are here; api_archive.go fetches the stream and classifies a
// refusal.
type archiveRead struct {
	target, guestPath string
	maxBytes          int64

	entry *Entry
	body  []byte
	err   error // what reading the stream said
}

// newArchiveRead checks the target and the guest path (absolute, no NUL) as every call does
// before the engine.
func newArchiveRead(target, guestPath string, maxBytes int64) (*archiveRead, error) {
	r := &archiveRead{target: target, guestPath: guestPath, maxBytes: maxBytes}
	if err := checkTarget(target); err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.verb(), guestPath, err)
	}
	if !strings.HasPrefix(guestPath, "/") || strings.ContainsRune(guestPath, 0) {
		return nil, fmt.Errorf("%s %s: %w: guest path must be absolute", r.verb(), guestPath, ErrInvalid)
	}
	return r, nil
}

// checkReadCap refuses a negative byte cap, which would otherwise ask for a stat.
func checkReadCap(guestPath string, maxBytes int64) error {
	if maxBytes < 0 {
		return fmt.Errorf("read %s: %w: negative byte cap", guestPath, ErrInvalid)
	}
	return nil
}

// verb names the read in errors.
func (r *archiveRead) verb() string {
	if r.maxBytes < 0 {
		return "stat"
	}
	return "read"
}

// args is the read's command-line form, which names it in errors and logs.
func (r *archiveRead) args() []string { return []string{"cp", r.target + ":" + r.guestPath, "-"} }

// consume reads the first entry of the archive stream s, within the bounds of [readHeader] and
// [readEntry], and keeps what it found; it returns the reading's error.
func (r *archiveRead) consume(s io.Reader) error {
	if r.maxBytes < 0 {
		r.entry, r.err = readHeader(s)
	} else {
		r.entry, r.body, r.err = readEntry(s, r.maxBytes)
	}
	return r.err
}

// answer is what the read returns once the engine delivered a stream: the entry and body, a
// cap or short-body error naming the path, or an unusable archive.
func (r *archiveRead) answer() (*Entry, []byte, error) {
	var capErr *CapExceededError
	var shortErr *shortBodyError
	switch {
	case r.err == nil:
		return r.entry, r.body, nil
	case errors.As(r.err, &capErr):
		capErr.Path = r.guestPath
		return r.entry, nil, capErr
	case errors.As(r.err, &shortErr):
		shortErr.Path = r.guestPath
		return r.entry, nil, shortErr
	}
	return nil, nil, fmt.Errorf("%s %s: docker returned an unusable archive: %w", r.verb(), r.guestPath, r.err)
}

// statAnswer turns a header-only read into Stat's answer: nil, nil for an absent path.
func statAnswer(e *Entry, _ []byte, err error) (*Entry, error) {
	if errors.Is(err, ErrPathAbsent) {
		return nil, nil
	}
	return e, err
}
