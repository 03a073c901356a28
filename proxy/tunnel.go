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
// bytes the client pipelined behind its request head, then each direction concurrently, the
// upload on a goroutine of its own and the download on the caller's. A direction that reaches
// EOF half-closes its destination; an error in either direction, or no progress in either for
// the idle timeout, cuts both.
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
	cut := func() {
		// The other direction's blocked read or write returns at once.
		client.Close()
		up.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.pipe(up, client, &last, touch); err != nil {
			cut()
		}
	}()
	if err := p.pipe(client, up, &last, touch); err != nil {
		cut()
	}
	<-done
}

// pipe copies src to dst until src's EOF, after which it half-closes dst and returns nil.
// It returns the error that ended it otherwise, including an idle timeout: a read waits until
// the idle timeout has passed since the last progress in either direction. It holds a copy
// buffer only from the moment src has bytes until they are written to dst (bufPool).
func (p *Proxy) pipe(dst, src net.Conn, last *atomic.Int64, touch func()) error {
	for {
		_ = src.SetReadDeadline(time.Unix(0, last.Load()).Add(p.opts.idleTimeout))
		buf, n, err := p.bufs.readReady(src)
		if n > 0 {
			touch()
			_ = dst.SetWriteDeadline(time.Now().Add(p.opts.idleTimeout))
			_, werr := dst.Write((*buf)[:n])
			p.bufs.put(buf)
			if werr != nil {
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
