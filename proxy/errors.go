package proxy

import "errors"

var (
	// ErrClosed is returned by [Proxy.Serve] when the proxy was closed before it started.
	ErrClosed = errors.New("proxy: closed")
	// ErrInvalidConfig is wrapped by every configuration error of [New], its options and
	// [ConfigFromEnv].
	ErrInvalidConfig = errors.New("proxy: invalid configuration")
)
