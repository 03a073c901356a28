package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProxy(t *testing.T) {
	if a, p, ok := parseProxy("10.213.0.2:3129"); !ok || a != [4]byte{10, 213, 0, 2} || p != 3129 {
		t.Fatalf("parseProxy = %v %d %v", a, p, ok)
	}
	for _, bad := range []string{"", "10.213.0.2", "10.213.0:3129", "10.213.0.256:1", "10.213.0.2:0", "10.213.0.2:70000", "[::1]:3129", "a.b.c.d:1"} {
		if _, _, ok := parseProxy(bad); ok {
			t.Errorf("parseProxy(%q) accepted", bad)
		}
	}
}

// The gate is released by the proxy's exact token, by the release file, and by nothing
// else: a refused dial, a wrong token, a short one.
func TestReleased(t *testing.T) {
	token := strings.Repeat("ef", 16)
	serve := func(t *testing.T, answer string) int {
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
		return ln.Addr().(*net.TCPAddr).Port
	}
	absent := filepath.Join(t.TempDir(), "release")
	loop := [4]byte{127, 0, 0, 1}
	if !released(absent, loop, serve(t, token+"\n"), token) {
		t.Fatal("the proxy's token did not release the gate")
	}
	for _, answer := range []string{strings.Repeat("00", 16) + "\n", token[:10], token + "x\n", ""} {
		if released(absent, loop, serve(t, answer), token) {
			t.Errorf("answer %q released the gate", answer)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if released(absent, loop, closed, token) {
		t.Fatal("a refused dial released the gate")
	}
	file := filepath.Join(t.TempDir(), "release")
	if err := os.WriteFile(file, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if !released(file, loop, closed, token) {
		t.Fatal("the release file did not release the gate")
	}
}
