package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"

	"github.com/mafsandbox/engine/egresslog"
)

// handshakeReason names why the workload's TLS handshake with the proxy failed, for the
// decision line (egresslog.ValidTLSReason): a ClientHello for another host, an alert the
// client sent (a client that does not trust the proxy's CA, such as a pinned one, sends
// bad_certificate or unknown_ca), a close or the head timeout mid-handshake, or anything else.
func handshakeReason(err error) string {
	var op *net.OpError
	switch {
	case errors.Is(err, errSNIMismatch):
		return egresslog.TLSSNIMismatch
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports a received alert as an unexported type whose text is the one
		// tls.AlertError gives for the same code: match the text to recover the code.
		for code := range 256 {
			if op.Err != nil && op.Err.Error() == tls.AlertError(code).Error() {
				return egresslog.TLSAlertReason(uint8(code))
			}
		}
		return egresslog.TLSHandshake
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return egresslog.TLSEOF
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return egresslog.TLSTimeout
	}
	return egresslog.TLSHandshake
}
