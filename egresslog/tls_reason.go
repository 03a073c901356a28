package egresslog

import (
	"strconv"
	"strings"
)

// Why the proxy refused a connection to an inspected host at the TLS handshake with the
// workload, before any request was read. The line is "DENY host:port tls=REASON"; REASON is
// one of these or "alert-" and an alert's name ([TLSAlertReason]), nothing else, so the guest
// chooses none of it.
const (
	// TLSSNIMismatch: the ClientHello named another host than the CONNECT request, or none
	// (domain fronting).
	TLSSNIMismatch = "sni-mismatch"
	// TLSEOF: the workload closed the connection mid-handshake without an alert.
	TLSEOF = "eof"
	// TLSTimeout: the handshake did not complete within the proxy's head timeout.
	TLSTimeout = "timeout"
	// TLSHandshake: any other failure (a malformed ClientHello, no shared version or cipher,
	// a reset).
	TLSHandshake = "handshake"
)

// tlsAlertPrefix starts the reason of a handshake the workload ended with an alert.
const tlsAlertPrefix = "alert-"

// TLSAlertReason returns the reason for a handshake the workload ended with the TLS alert
// code: "alert-" and the alert's RFC 8446 name with '-' for '_' (a client that does not trust
// the proxy's CA sends bad_certificate or unknown_ca), or "alert-" and the code in decimal
// for an alert that has no name here.
func TLSAlertReason(code uint8) string {
	if name := tlsAlertName(code); name != "" {
		return tlsAlertPrefix + name
	}
	return tlsAlertPrefix + strconv.Itoa(int(code))
}

// tlsAlertName names the alerts of RFC 8446 §6 and RFC 5246 §7.2 a client may send; "" for
// another code.
func tlsAlertName(code uint8) string {
	switch code {
	case 0:
		return "close-notify"
	case 10:
		return "unexpected-message"
	case 20:
		return "bad-record-mac"
	case 21:
		return "decryption-failed"
	case 22:
		return "record-overflow"
	case 30:
		return "decompression-failure"
	case 40:
		return "handshake-failure"
	}
	return tlsCertificateAlertName(code)
}

// tlsCertificateAlertName names the alerts from 42 up (split from tlsAlertName to keep each
// switch small).
func tlsCertificateAlertName(code uint8) string {
	names := [...]string{
		42: "bad-certificate", 43: "unsupported-certificate", 44: "certificate-revoked",
		45: "certificate-expired", 46: "certificate-unknown", 47: "illegal-parameter",
		48: "unknown-ca", 49: "access-denied", 50: "decode-error", 51: "decrypt-error",
		70: "protocol-version", 71: "insufficient-security", 80: "internal-error",
		86: "inappropriate-fallback", 90: "user-canceled", 100: "no-renegotiation",
		109: "missing-extension", 110: "unsupported-extension", 112: "unrecognized-name",
		113: "bad-certificate-status-response", 115: "unknown-psk-identity",
		116: "certificate-required", 120: "no-application-protocol", 121: "ech-required",
	}
	if int(code) < len(names) && code >= 42 {
		return names[code]
	}
	return ""
}

// ValidTLSReason reports whether reason is one the proxy writes: one of the constants above
// or [TLSAlertReason] of some code, in its one spelling.
func ValidTLSReason(reason string) bool {
	switch reason {
	case TLSSNIMismatch, TLSEOF, TLSTimeout, TLSHandshake:
		return true
	}
	rest, ok := strings.CutPrefix(reason, tlsAlertPrefix)
	if !ok || rest == "" {
		return false
	}
	if code, err := strconv.ParseUint(rest, 10, 8); err == nil {
		return TLSAlertReason(uint8(code)) == reason // "alert-042" or "alert-48" are not spellings the proxy writes
	}
	for code := range 256 {
		if tlsAlertName(uint8(code)) == rest {
			return true
		}
	}
	return false
}
