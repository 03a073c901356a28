//go:build !unix

package flock

import (
	"context"
	"os"
)

// Lock opens path (creating it); without flock it locks nothing.
func Lock(_ context.Context, path string, _ bool) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
}

// Held is always false without flock.
func Held(string) (bool, error) { return false, nil }
