package proxy

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// BenchmarkTunnelThroughput moves 1 MiB per operation through the proxy on loopback, one
// tunnel per parallel client (-cpu sets how many): "upload" from the client into a target
// that discards, "download" from a target that writes into a client that discards.
func BenchmarkTunnelThroughput(b *testing.B) {
	for _, download := range []bool{false, true} {
		name := "upload"
		if download {
			name = "download"
		}
		b.Run(name, func(b *testing.B) { benchTunnel(b, download) })
	}
}

func benchTunnel(b *testing.B, download bool) {
	chunk := make([]byte, 1<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if !download {
					_, _ = io.Copy(io.Discard, c)
					_, _ = c.Write([]byte{1})
					return
				}
				// The client's one byte asks for each chunk.
				one := make([]byte, 1)
				for {
					if _, err := io.ReadFull(c, one); err != nil {
						return
					}
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			})
		}
	})
	r := &stubResolver{answers: map[string][]netip.Addr{"bench.test": addrs("127.0.0.1")}}
	p, err := New([]string{"bench.test"}, WithDecisionLog(io.Discard), WithResolver(r), withAdmitLoopback(),
		withDialPort(ln.Addr().(*net.TCPAddr).Port))
	if err != nil {
		b.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(pln) }()
	defer func() { p.Close(); <-served }()

	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", pln.Addr().String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		if _, err := io.WriteString(c, "CONNECT bench.test:443 HTTP/1.1\r\n\r\n"); err != nil {
			b.Error(err)
			return
		}
		buf := make([]byte, len(chunk))
		if _, err := io.ReadFull(c, buf[:len(established)]); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if download {
				if _, err := c.Write(buf[:1]); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Error(err)
					return
				}
				continue
			}
			if _, err := c.Write(chunk); err != nil {
				b.Error(err)
				return
			}
		}
		if !download {
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.ReadFull(c, buf[:1]) // the target has read everything
		}
	})
}
