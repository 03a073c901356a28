package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// tunnel copies bytes both ways between client and up until both directions end: first the
// bytes the client pipelined behind its request head, then each direction concurrently. A
// direction that reaches EOF half-closes its destination; an error in either direction, or
// no progress in either for the idle timeout, cuts both.
func (p *Proxy) tunnel(client, up net.Conn, pipelined []byte) {
	var last atomic.Int64 // unix nanoseconds of the last progress in either direction
	touch := func() { last.Store(time.Now().UnixNano()) }
	touch()
	if len(pipelined) > 0 {
		_ = up.SetWriteDeadline(time.Now().Add(p.opts.idleTimeout))
		if _, err := up.Write(pipelined); err != nil {
			return
		}
	}
	done := make(chan error, 2)
	go func() { done <- p.pipe(up, client, &last, touch) }()
	go func() { done <- p.pipe(client, up, &last, touch) }()
	for range 2 {
		if err := <-done; err != nil {
			// Cut both: the other direction's blocked read or write returns at once.
			client.Close()
			up.Close()
		}
	}
}

// pipe copies src to dst until src's EOF, after which it half-closes dst and returns nil.
// It returns the error that ended it otherwise, including an idle timeout: a read waits until
// the idle timeout has passed since the last progress in either direction.
func (p *Proxy) pipe(dst, src net.Conn, last *atomic.Int64, touch func()) error {
	buf := make([]byte, copyBufSize)
	for {
		_ = src.SetReadDeadline(time.Unix(0, last.Load()).Add(p.opts.idleTimeout))
		n, err := src.Read(buf)
		if n > 0 {
			touch()
			_ = dst.SetWriteDeadline(time.Now().Add(p.opts.idleTimeout))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			touch()
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			if cw, ok := dst.(closeWriter); ok {
				return cw.CloseWrite()
			}
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded) &&
			time.Since(time.Unix(0, last.Load())) < p.opts.idleTimeout:
			// The other direction moved: keep waiting.
		default:
			return err
		}
	}
}
