package egresslog

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// Truncation says why a parsed window may be short of what the proxy wrote. It never means
// that a decision was certainly dropped.
type Truncation struct {
	// Lines: the log held more lines than the tail bound and the oldest were dropped. Lines
	// are counted before decisions are picked out, so a tail full of decisions plus the
	// readiness line sets it although every decision was kept; exactly the bound's number of
	// lines does not. (The drain asks the engine for one line more than the bound.)
	Lines bool
	// Bytes: the byte cap was reached. The rest of the stream went unread and the final,
	// possibly partial, line was dropped.
	Bytes bool
}

// Truncated reports whether the window may be short for either reason.
func (t Truncation) Truncated() bool { return t.Lines || t.Bytes }

// ParseLog reads a proxy's decision log from r (egress-and-reap.md §3.3) and returns its
// decisions in the order written.
//
// It reads at most [LogMaxBytes] bytes ([WithMaxBytes]) and keeps the last [TailLines] lines
// ([WithTailLines]). Lines end at a line feed; one carriage return before it is dropped and
// empty lines are not counted. With [WithTimestamps] the engine's leading RFC 3339 time and one
// space are stripped and kept as At. A line is a decision when the text before its first space
// is one of the four verbs and the rest, split at its last ':', is a non-empty host and a port
// of ASCII digits (so "ALLOW ::1:443" is host "::1", port 443), optionally followed by a
// space, a method, a space and a path starting with '/' (a request an inspecting rule
// decided: Method and Path), optionally followed by " status=N out=N in=N rule=PATTERN" (the
// request's outcome and rule, [FormatDecision]; a proxy older than these fields writes none);
// or, on a DENY only, by " tls=REASON" with a reason [ValidTLSReason] accepts (TLS). A line
// with any other text after the port is skipped.
// Every other line — the readiness
// line, noise, a line without its time prefix — is skipped silently.
//
// It fails when an option is invalid, and when r fails: the decisions read before the failure
// are returned with the error, without the final line, which may be partial.
func ParseLog(r io.Reader, opts ...ParseOpt) ([]sandbox.EgressDecision, Truncation, error) {
	o := defaultParseOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, Truncation{}, err
		}
	}

	var tr Truncation
	data, rerr := io.ReadAll(io.LimitReader(r, int64(o.maxBytes)+1))
	partial := rerr != nil
	if len(data) > o.maxBytes {
		data = data[:o.maxBytes]
		tr.Bytes = true
		partial = true
	}
	if partial {
		// Keep whole lines only: whatever follows the last line feed may be cut short.
		data = data[:bytes.LastIndexByte(data, '\n')+1]
	}

	lines := splitLines(data)
	if len(lines) > o.tailLines {
		lines = lines[len(lines)-o.tailLines:]
		tr.Lines = true
	}
	decisions := make([]sandbox.EgressDecision, 0, len(lines))
	for _, line := range lines {
		if d, ok := parseLine(line, o.timestamps); ok {
			decisions = append(decisions, d)
		}
	}
	if rerr != nil {
		return decisions, tr, fmt.Errorf("read proxy log: %w", rerr)
	}
	return decisions, tr, nil
}

// splitLines splits data at line feeds, drops one carriage return before each and leaves out
// empty lines.
func splitLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 {
			lines = append(lines, string(line))
		}
	}
	return lines
}

// parseLine reads one decision line, with its timestamp prefix when timestamps is set.
func parseLine(line string, timestamps bool) (sandbox.EgressDecision, bool) {
	var d sandbox.EgressDecision
	if timestamps {
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok {
			return d, false
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			return d, false
		}
		d.At, line = at, rest
	}
	verb, target, ok := strings.Cut(line, " ")
	if !ok || !slices.Contains(sandbox.EgressDecisionCodes(), sandbox.EgressDecisionCode(verb)) {
		return d, false
	}
	target, request, hasRequest := strings.Cut(target, " ")
	if reason, isTLS := strings.CutPrefix(request, "tls="); hasRequest && isTLS {
		// Only a DENY carries a handshake's reason, and only one the proxy names.
		if verb != string(sandbox.DecisionDeny) || !ValidTLSReason(reason) {
			return d, false
		}
		d.TLS = reason
	} else if hasRequest && !parseRequest(request, &d) {
		return d, false
	}
	i := strings.LastIndexByte(target, ':')
	if i <= 0 {
		return d, false
	}
	host, portText := target[:i], target[i+1:]
	if portText == "" || strings.ContainsFunc(portText, func(r rune) bool { return r < '0' || r > '9' }) {
		return d, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return d, false // more digits than an int holds
	}
	d.Decision, d.Host, d.Port = sandbox.EgressDecisionCode(verb), host, port
	return d, true
}

// parseRequest reads "METHOD path" and, when present, the outcome fields after it into d.
func parseRequest(request string, d *sandbox.EgressDecision) bool {
	f := strings.Split(request, " ")
	if len(f) != 2 && len(f) != 6 {
		return false
	}
	method, path := f[0], f[1]
	if !validMethod(method) || !strings.HasPrefix(path, "/") || !printable(path) {
		return false
	}
	d.Method, d.Path = method, path
	if len(f) == 2 {
		return true
	}
	status, okS := number(f[2], "status=", 999)
	out, okO := number(f[3], "out=", math.MaxInt64)
	in, okI := number(f[4], "in=", math.MaxInt64)
	rule, okR := strings.CutPrefix(f[5], "rule=")
	if !okS || !okO || !okI || !okR || rule == "" || len(rule) > MaxRule || !printable(rule) {
		return false
	}
	d.Status, d.BytesOut, d.BytesIn, d.Rule = int(status), out, in, rule
	return true
}

// number reads "key=digits" with a value at most limit.
func number(field, key string, limit int64) (int64, bool) {
	v, ok := strings.CutPrefix(field, key)
	if !ok || v == "" || strings.ContainsFunc(v, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n <= limit
}
