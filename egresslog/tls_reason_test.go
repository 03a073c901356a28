package egresslog

import (
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// TestTLSRefusalRoundTrip: each reason the proxy writes is read back as written, and a tunnel
// decision without one keeps its exact old line.
func TestTLSRefusalRoundTrip(t *testing.T) {
	reasons := []string{TLSSNIMismatch, TLSEOF, TLSTimeout, TLSHandshake,
		TLSAlertReason(42), TLSAlertReason(48), TLSAlertReason(255)}
	if reasons[4] != "alert-bad-certificate" || reasons[5] != "alert-unknown-ca" || reasons[6] != "alert-255" {
		t.Fatalf("alert reasons %q", reasons[4:])
	}
	for _, r := range reasons {
		d := sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "api.example", Port: 443, TLS: r}
		line, err := FormatDecision(d)
		if err != nil || line != "DENY api.example:443 tls="+r+"\n" {
			t.Fatalf("format %q: %q, %v", r, line, err)
		}
		got, _, err := ParseLog(strings.NewReader(line))
		if err != nil || len(got) != 1 || got[0] != d {
			t.Fatalf("parse %q: %+v, %v", line, got, err)
		}
	}
	for code := range 256 {
		if r := TLSAlertReason(uint8(code)); !ValidTLSReason(r) {
			t.Errorf("alert %d: %q is refused", code, r)
		}
	}
	line, err := FormatDecision(sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "api.example", Port: 443})
	if err != nil || line != "DENY api.example:443\n" {
		t.Fatalf("a tunnel decision's line changed: %q, %v", line, err)
	}
}

// TestTLSRefusalRefusesForgedText: a reason outside the closed set, on another verb or next
// to a request is neither written nor read; guest-chosen text in the host cannot make one.
func TestTLSRefusalRefusesForgedText(t *testing.T) {
	bad := []sandbox.EgressDecision{
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "forged"},
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "alert-forged"},
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "alert-48"},   // named: alert-unknown-ca
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "alert-0255"}, // not the one spelling
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "alert-256"},
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "alert-"},
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "eof rule=x"},
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: "eof\nALLOW b:443"},
		{Decision: sandbox.DecisionAllow, Host: "a.example", Port: 443, TLS: TLSEOF},
		{Decision: sandbox.DecisionDeny, Host: "a.example", Port: 443, TLS: TLSEOF, Method: "GET", Path: "/"},
		{Decision: sandbox.DecisionDeny, Host: "a.example:443 tls=eof", Port: 443},
	}
	for _, d := range bad {
		if line, err := FormatDecision(d); !errors.Is(err, ErrInvalidDecision) {
			t.Errorf("%+v was written: %q, %v", d, line, err)
		}
	}
	log := "DENY a.example:443 tls=forged\n" +
		"DENY a.example:443 tls=alert-forged\n" +
		"DENY a.example:443 tls=\n" +
		"DENY a.example:443 tls=eof extra\n" +
		"ALLOW a.example:443 tls=eof\n" +
		"UNREACHABLE a.example:443 tls=handshake\n" +
		"DENY a.example:443 GET /x tls=eof\n" +
		"DENY a.example:443 TLS=eof\n"
	if got, _, err := ParseLog(strings.NewReader(log)); err != nil || len(got) != 0 {
		t.Fatalf("forged lines read as decisions: %+v, %v", got, err)
	}
}
