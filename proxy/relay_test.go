package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// informationalOrigin answers /repos/acme/hints with a 103 Early Hints before its 200, reads
// the body of any other request (so Go's server sends 100 Continue to a client that expects
// it) and answers how much it read; /repos/acme/refuse answers 417 without reading.
func informationalOrigin(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/repos/acme/hints":
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "hinted")
	case "/repos/acme/refuse":
		w.WriteHeader(http.StatusExpectationFailed)
	default:
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "read %d", n)
	}
}

// TestInspectRelaysInformationalResponses: an origin's 100 Continue and 103 Early Hints reach
// the workload as such and its final response follows them; the next pipelined request gets
// its own response; the decision log records each request's final status.
func TestInspectRelaysInformationalResponses(t *testing.T) {
	rule := sandbox.EgressRule{Host: inspectHost, Methods: []string{"GET", "POST"}, Paths: []string{"/repos/acme/**"}}
	expect := func(path, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: example.com\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	}
	cases := []struct {
		name string
		raw  string
		want []string // the responses the workload reads, in order
		log  []int    // the statuses of the decisions
	}{
		{"100 Continue, pipelined", expect("/repos/acme/up", "hello") + get("/repos/acme/next"),
			[]string{"100 Continue ", "200 OK read 5", "200 OK read 0"}, []int{200, 200}},
		{"103 Early Hints, pipelined", get("/repos/acme/hints") + get("/repos/acme/next"),
			[]string{"103 Early Hints ", "200 OK hinted", "200 OK read 0"}, []int{200, 200}},
		{"HTTP/1.0 gets no 1xx", "GET /repos/acme/hints HTTP/1.0\r\nHost: example.com\r\n\r\n",
			[]string{"200 OK hinted"}, []int{200}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := startRecordingTarget(t)
			rt.serve(informationalOrigin)
			tp := startInspectingProxy(t, rt, rule, WithUpstreamRoots(rt.roots()))
			conn, err := connectTLS(t, tp, inspectHost)
			if err != nil {
				t.Fatal(err)
			}
			got := send(t, conn, tc.raw, len(tc.want))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("responses %q, want %q", got, tc.want)
			}
			conn.Close()
			tp.Close()
			checkStatuses(t, tp.log.String(), tc.log...)
		})
	}
}

// checkStatuses parses a decision log and checks its lines' statuses.
func checkStatuses(t *testing.T, log string, want ...int) {
	t.Helper()
	ds, _, err := egresslog.ParseLog(strings.NewReader(log))
	if err != nil || len(ds) != len(want) {
		t.Fatalf("decisions %+v (%v) from %q, want %d", ds, err, log, len(want))
	}
	for i, d := range ds {
		if d.Status != want[i] || d.BytesIn == 0 {
			t.Errorf("decision %d: %+v, want status %d and the bytes relayed", i, d, want[i])
		}
	}
}

// TestInspectExpectContinueWaits: a client that sends its body only once it has read 100
// Continue (as curl and Go's Transport do) gets it, then its final response, and the
// connection serves the next request; a final answer instead of a 100 (the origin refused
// the body) reaches the client, which never sent its body, and ends the connection.
func TestInspectExpectContinueWaits(t *testing.T) {
	rule := sandbox.EgressRule{Host: inspectHost, Methods: []string{"GET", "POST"}, Paths: []string{"/repos/acme/**"}}
	rt := startRecordingTarget(t)
	rt.serve(informationalOrigin)
	tp := startInspectingProxy(t, rt, rule, WithUpstreamRoots(rt.roots()))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	head := "POST /repos/acme/up HTTP/1.1\r\nHost: example.com\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // a proxy that holds the 100 back never answers
	if got := readStatus(t, br); got != http.StatusContinue {
		t.Fatalf("status %d before the body, want 100", got)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(conn, "hello"+get("/repos/acme/next")); err != nil {
		t.Fatal(err)
	}
	if got := readStatus(t, br); got != http.StatusOK {
		t.Fatalf("final status %d, want 200", got)
	}
	if got := readStatus(t, br); got != http.StatusOK {
		t.Fatalf("the next request's status %d, want 200", got)
	}
	// The origin answers 417 without asking for the body: the client, which sends it only
	// after a 100, gets the 417 and then the end of the connection.
	head = "POST /repos/acme/refuse HTTP/1.1\r\nHost: example.com\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if got := readStatus(t, br); got != http.StatusExpectationFailed {
		t.Fatalf("status %d, want 417", got)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection goes on after a final answer to a body the client never sent")
	}
	conn.Close()
	tp.Close()
	checkStatuses(t, tp.log.String(), 200, 200, 417)
}

// readStatus reads one response, 1xx included, and returns its status.
func readStatus(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read a response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
