package proxy

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// bufPool lends the tunnels' copy buffers. A direction borrows one only once its source has
// bytes to give (see readReady) and returns it as soon as they are written on, so an idle
// tunnel holds none and the buffers lent at once are those of the directions moving data at
// that moment. At most largeBufs large buffers are out at once; past that a direction gets a
// small one, so a flood of busy tunnels slows each of them down instead of growing the heap,
// and no tunnel waits for another to release a buffer.
type bufPool struct {
	large chan struct{} // one token per large buffer lent
	big   sync.Pool     // *[]byte of copyBufSize
	small sync.Pool     // *[]byte of smallBufSize
	lent  atomic.Int64  // buffers lent, large and small
}

func newBufPool(large int) *bufPool {
	return &bufPool{
		large: make(chan struct{}, large),
		big:   sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }},
		small: sync.Pool{New: func() any { b := make([]byte, smallBufSize); return &b }},
	}
}

// get lends a buffer: a large one while fewer than the pool's bound are lent, else a small one.
func (bp *bufPool) get() *[]byte {
	bp.lent.Add(1)
	select {
	case bp.large <- struct{}{}:
		return bp.big.Get().(*[]byte)
	default:
		return bp.small.Get().(*[]byte)
	}
}

// put takes back a buffer that get lent.
func (bp *bufPool) put(b *[]byte) {
	bp.lent.Add(-1)
	if len(*b) == copyBufSize {
		bp.big.Put(b)
		<-bp.large
		return
	}
	bp.small.Put(b)
}

// readReady reads once from src into a buffer borrowed from bp, borrowing it only when src has
// something to give: bytes, its end, or an error. It returns the buffer (nil when none is
// lent: the caller puts back what it gets), the count read, and io.EOF at src's end. It
// waits for src through the runtime's poller with no buffer held, honouring src's read
// deadline; a source that is not a socket is read with a buffer held while it blocks.
func (bp *bufPool) readReady(src net.Conn) (*[]byte, int, error) {
	sc, ok := src.(syscall.Conn)
	if !ok {
		return bp.readHolding(src)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return bp.readHolding(src)
	}
	var (
		buf  *[]byte
		n    int
		rerr error
	)
	err = rc.Read(func(fd uintptr) bool {
		buf = bp.get()
		for {
			n, rerr = syscall.Read(int(fd), *buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			// Nothing yet: give the buffer back and let the poller wait.
			bp.put(buf)
			buf = nil
			return false
		}
		return true
	})
	switch {
	case err != nil:
		// A deadline or a close ended the wait.
		if buf != nil {
			bp.put(buf)
		}
		return nil, 0, err
	case rerr != nil:
		bp.put(buf)
		return nil, 0, &net.OpError{Op: "read", Net: src.LocalAddr().Network(), Source: src.LocalAddr(),
			Addr: src.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		bp.put(buf)
		return nil, 0, io.EOF
	}
	return buf, n, nil
}

// readHolding is readReady for a source without a file descriptor. A read that returns bytes
// and an error returns the bytes; the next read returns the error again.
func (bp *bufPool) readHolding(src net.Conn) (*[]byte, int, error) {
	buf := bp.get()
	n, err := src.Read(*buf)
	if n == 0 {
		bp.put(buf)
		return nil, 0, err
	}
	return buf, n, nil
}
