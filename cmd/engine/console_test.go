package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/natstest"
)

// TestConsoleListensOnLoopbackOnly: the page acts with the console's NATS identity and has no
// login, so an address off loopback is refused before anything starts.
func TestConsoleListensOnLoopbackOnly(t *testing.T) {
	cases := []struct {
		name, listen string
		wantErr      bool
	}{
		{"default", defaultConsoleListen, false},
		{"any port", "127.0.0.1:0", false},
		{"localhost", "localhost:9000", false},
		{"ipv6 loopback", "[::1]:9000", false},
		{"every address", ":8422", true},
		{"all interfaces", "0.0.0.0:8422", true},
		{"a host name", "example.com:8422", true},
		{"no port", "127.0.0.1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := consoleVerb{}
			err := v.parse([]string{"--listen", tc.listen})
			if (err != nil) != tc.wantErr {
				t.Fatalf("parse --listen %s: %v, want error %v", tc.listen, err, tc.wantErr)
			}
		})
	}
}

// TestConsoleServesItsPage runs the verb against an embedded NATS server: it writes its URL to
// the ready file, serves the page there, and stops when its context ends.
func TestConsoleServesItsPage(t *testing.T) {
	srv := natstest.Run(t)
	ready := filepath.Join(t.TempDir(), "ready")
	v := consoleVerb{}
	if err := v.parse([]string{"--listen", "127.0.0.1:0", "--ready-file", ready, "--nats-url", srv.ClientURL(), "--log-format", "json", "--log-level", "error"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.run(ctx) }()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			url = strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatal("no ready file within 10 s")
		}
	}
	page := httpGet(t, url)
	if !strings.Contains(page, "maf-sandbox console") || !strings.Contains(page, "app.js") {
		t.Fatalf("the page at %s: %.200s", url, page)
	}
	if js := httpGet(t, url+"app.js"); !strings.Contains(js, "EventSource") {
		t.Fatalf("app.js: %.200s", js)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the console did not stop within 10 s of its context's end")
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("get %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("get %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}
