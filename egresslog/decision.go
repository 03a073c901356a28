package egresslog

import (
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mafsandbox/engine/sandbox"
)

// ReadyMarker is the substring of the readiness line that acquire polls the proxy's log for.
// No decision line contains it.
const ReadyMarker = "listening"

// MaxLoggedPath bounds the path a request decision carries: a longer path is cut to this many
// bytes and ends in [PathCut].
const (
	MaxLoggedPath = 512
	PathCut       = "..."
)

// FormatDecision returns the log line of one decision, line feed included: "VERB host:port\n"
// for a tunnel, and for one request an inspecting rule decided (d.Method set)
//
//	VERB host:port METHOD path status=N out=N in=N rule=PATTERN
//
// and, for a connection to an inspected host refused at the workload's TLS handshake (d.TLS
// set: a DENY without a request, reason one [ValidTLSReason] accepts),
//
//	DENY host:port tls=REASON
//
// A request's line carries the answer's status, the bytes sent upstream and relayed back,
// and the host pattern of the rule that decided. d.At is not written: times come from the engine's log driver.
//
// It fails with [ErrInvalidDecision] when d.Decision is not one of the verbs, when the host is
// empty or holds a byte outside 0x21–0x7E, when the port is outside 1–65535, when a method is
// not an upper-case token or a path does not start with '/' or holds a byte outside 0x21–0x7E,
// when a path comes without a method, and, for a request, when the status is outside 0–999,
// a byte count is negative, or the rule is empty, over [MaxRule] bytes or holds a byte outside
// 0x21–0x7E, and when d.TLS is set on another verb, with a request, or is not a reason
// [ValidTLSReason] accepts. The proxy refuses such requests before it decides anything, so a
// failure here is a bug; refusing to write it keeps guest-chosen text from forging a field
// or a second line (no field may hold a space). A path over [MaxLoggedPath] bytes is cut.
func FormatDecision(d sandbox.EgressDecision) (string, error) {
	line, err := formatTunnel(d)
	if err != nil {
		return "", err
	}
	if d.TLS != "" {
		return formatTLS(line, d)
	}
	if d.Method == "" && d.Path == "" {
		return line, nil
	}
	if !validMethod(d.Method) {
		return "", fmt.Errorf("%w: method %q", ErrInvalidDecision, d.Method)
	}
	if !strings.HasPrefix(d.Path, "/") || !printable(d.Path) {
		return "", fmt.Errorf("%w: path %q", ErrInvalidDecision, d.Path)
	}
	if d.Status < 0 || d.Status > 999 || d.BytesOut < 0 || d.BytesIn < 0 {
		return "", fmt.Errorf("%w: status %d, bytes %d out, %d in", ErrInvalidDecision, d.Status, d.BytesOut, d.BytesIn)
	}
	if d.Rule == "" || len(d.Rule) > MaxRule || !printable(d.Rule) {
		return "", fmt.Errorf("%w: rule %q", ErrInvalidDecision, d.Rule)
	}
	path := d.Path
	if len(path) > MaxLoggedPath {
		path = path[:MaxLoggedPath-len(PathCut)] + PathCut
	}
	return strings.TrimSuffix(line, "\n") + " " + d.Method + " " + path +
		" status=" + strconv.Itoa(d.Status) + " out=" + strconv.FormatInt(d.BytesOut, 10) +
		" in=" + strconv.FormatInt(d.BytesIn, 10) + " rule=" + d.Rule + "\n", nil
}

// formatTLS appends the reason of a handshake refusal to a tunnel's line: only on a DENY
// that names no request, and only a reason [ValidTLSReason] accepts.
func formatTLS(line string, d sandbox.EgressDecision) (string, error) {
	if d.Decision != sandbox.DecisionDeny || d.Method != "" || d.Path != "" || !ValidTLSReason(d.TLS) {
		return "", fmt.Errorf("%w: tls %q on %s %q", ErrInvalidDecision, d.TLS, d.Decision, d.Method)
	}
	return strings.TrimSuffix(line, "\n") + " tls=" + d.TLS + "\n", nil
}

// MaxRule bounds the rule a request decision names (a host pattern: at most 253 octets).
const MaxRule = 253

func printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}

func validMethod(m string) bool {
	return m != "" && !strings.ContainsFunc(m, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
	})
}

func formatTunnel(d sandbox.EgressDecision) (string, error) {
	if !slices.Contains(sandbox.EgressDecisionCodes(), d.Decision) {
		return "", fmt.Errorf("%w: verb %q", ErrInvalidDecision, string(d.Decision))
	}
	if d.Host == "" {
		return "", fmt.Errorf("%w: empty host", ErrInvalidDecision)
	}
	for i := 0; i < len(d.Host); i++ {
		if c := d.Host[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("%w: host holds byte %#02x", ErrInvalidDecision, c)
		}
	}
	if d.Port < 1 || d.Port > 65535 {
		return "", fmt.Errorf("%w: port %d", ErrInvalidDecision, d.Port)
	}
	return string(d.Decision) + " " + d.Host + ":" + strconv.Itoa(d.Port) + "\n", nil
}

// FormatReady returns the readiness line, line feed included:
// "listening on <port>; allowing: <a>, <b>\n", or "… allowing: nothing\n" for an empty list.
// It is not a decision, and [ParseLog] skips it.
func FormatReady(port int, allow []string) string {
	list := "nothing"
	if len(allow) > 0 {
		list = strings.Join(allow, ", ")
	}
	return ReadyMarker + " on " + strconv.Itoa(port) + "; allowing: " + list + "\n"
}

// CAMarker starts the line on which a proxy that inspects announces its CA certificate.
const CAMarker = "ca-certificate"

// FormatCA returns the line announcing the proxy's CA certificate, line feed included:
// "ca-certificate <base64 of the DER certificate>\n". It is public by nature (a workload must
// trust it) and carries no key. [ParseLog] skips it; [ParseCA] reads it.
func FormatCA(der []byte) string {
	return CAMarker + " " + base64.StdEncoding.EncodeToString(der) + "\n"
}

// ParseCA returns the DER certificate of the first [FormatCA] line in log, or nil. A line may
// carry the engine's log timestamp before it (`docker logs --timestamps`: one field and a
// space).
func ParseCA(log string) []byte {
	for _, line := range strings.Split(log, "\n") {
		rest, ok := strings.CutPrefix(line, CAMarker+" ")
		if !ok {
			if _, after, cut := strings.Cut(line, " "); cut {
				rest, ok = strings.CutPrefix(after, CAMarker+" ")
			}
		}
		if ok {
			if der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest)); err == nil {
				return der
			}
		}
	}
	return nil
}

// Writer writes the proxy's log lines to an underlying writer, each with a single Write under
// a mutex, so lines from concurrent connections never interleave. It does no buffering: give
// it an unbuffered writer (the process's standard output) and every line is flushed when its
// Write returns. A Writer is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteDecision writes the line of one decision. It fails with [ErrInvalidDecision] as
// [FormatDecision] does, writing nothing, and with the underlying writer's error.
func (w *Writer) WriteDecision(code sandbox.EgressDecisionCode, host string, port int) error {
	line, err := FormatDecision(sandbox.EgressDecision{Decision: code, Host: host, Port: port})
	if err != nil {
		return err
	}
	return w.write(line)
}

// WriteRequest writes the line of one request an inspecting rule decided (d.Method set). It
// fails as [FormatDecision] does, writing nothing, and with the underlying writer's error.
func (w *Writer) WriteRequest(d sandbox.EgressDecision) error {
	line, err := FormatDecision(d)
	if err != nil {
		return err
	}
	return w.write(line)
}

// WriteTLSRefusal writes the line of a connection to an inspected host refused at the
// workload's TLS handshake, for reason ([ValidTLSReason]). It fails as [FormatDecision] does,
// writing nothing, and with the underlying writer's error.
func (w *Writer) WriteTLSRefusal(host string, port int, reason string) error {
	line, err := FormatDecision(sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: host, Port: port, TLS: reason})
	if err != nil {
		return err
	}
	return w.write(line)
}

// WriteCA writes the CA line ([FormatCA]).
func (w *Writer) WriteCA(der []byte) error { return w.write(FormatCA(der)) }

// WriteReady writes the readiness line ([FormatReady]). It fails with the underlying writer's
// error.
func (w *Writer) WriteReady(port int, allow []string) error {
	return w.write(FormatReady(port, allow))
}

func (w *Writer) write(line string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := io.WriteString(w.w, line)
	return err
}
