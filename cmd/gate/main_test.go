package main

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The gate is released by the proxy's exact token, by the release file, and by nothing
// else: a refused dial, a wrong token, a short one.
func TestReleased(t *testing.T) {
	token := strings.Repeat("ef", 16)
	serve := func(t *testing.T, answer string) netip.AddrPort {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(answer))
				c.Close()
			}
		}()
		return ln.Addr().(*net.TCPAddr).AddrPort()
	}
	absent := filepath.Join(t.TempDir(), "release")
	if !released(absent, serve(t, token+"\n"), token) {
		t.Fatal("the proxy's token did not release the gate")
	}
	for _, answer := range []string{strings.Repeat("00", 16) + "\n", token[:10], token + "x\n", ""} {
		if released(absent, serve(t, answer), token) {
			t.Errorf("answer %q released the gate", answer)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	if released(absent, closed, token) {
		t.Fatal("a refused dial released the gate")
	}
	file := filepath.Join(t.TempDir(), "release")
	if err := os.WriteFile(file, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if !released(file, closed, token) {
		t.Fatal("the release file did not release the gate")
	}
}
