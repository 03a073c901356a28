package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// udpExchange tells an answer (a datagram, a port-unreachable) from silence: the sandbox
// attack test counts on it to see a UDP reach.
func TestUDPExchange(t *testing.T) {
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 16)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo(buf[:n], from)
		}
	}()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closed, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.LocalAddr().String()
	closed.Close()

	if got, err := udpExchange(echo.LocalAddr().String(), time.Second); err != nil || got != "answered a datagram" {
		t.Errorf("echo: %q, %v", got, err)
	}
	if got, err := udpExchange(closedAddr, time.Second); err != nil || !strings.Contains(got, "refused") {
		t.Errorf("closed port: %q, %v", got, err)
	}
	if got, err := udpExchange(silent.LocalAddr().String(), 100*time.Millisecond); err == nil {
		t.Errorf("silence taken for an answer: %q", got)
	}
}

func TestQuestion(t *testing.T) {
	// ID 0x1234, RD, one question: canary-1.maf-e2e.example. AAAA IN.
	q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range []string{"canary-1", "maf-e2e", "example"} {
		q = append(append(q, byte(len(l))), l...)
	}
	q = append(q, 0, 0, 28, 0, 1)
	name, qtype, end, ok := question(q)
	if !ok || name != "canary-1.maf-e2e.example." || qtype != 28 || end != len(q) {
		t.Fatalf("question = %q %d %d %v", name, qtype, end, ok)
	}
	for _, bad := range [][]byte{q[:11], q[:len(q)-2], append(append([]byte(nil), q[:12]...), 70, 'a'),
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, _, _, ok := question(bad); ok {
			t.Errorf("question(%x) accepted", bad)
		}
	}
}
