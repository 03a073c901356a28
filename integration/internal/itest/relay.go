package itest

import (
	"io"
	"net"
	"sync"
)

// Relay carries one client connection to the daemon's socket: down copies daemon to client,
// up copies client to daemon (a proxy may hold or cut it). Each direction ends with a
// half-close of its destination, never a full close: the docker client half-closes a hijacked
// exec stream when its stdin ends, and closing the whole connection there would end the stream
// before the command has run — the client then reports the exec finished while the daemon is
// still starting it (and a freeze landing then wedges a 20.10 daemon). Both connections are
// closed once both directions are done. wg counts the relay until then.
func Relay(wg *sync.WaitGroup, client, daemon net.Conn, up func(dst io.Writer, src io.Reader)) {
	if up == nil {
		up = func(dst io.Writer, src io.Reader) { _, _ = io.Copy(dst, src) }
	}
	var both sync.WaitGroup
	both.Add(2)
	wg.Add(1)
	go func() { defer both.Done(); _, _ = io.Copy(client, daemon); halfClose(client) }()
	go func() { defer both.Done(); up(daemon, client); halfClose(daemon) }()
	go func() {
		defer wg.Done()
		both.Wait()
		client.Close()
		daemon.Close()
	}()
}

func halfClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
