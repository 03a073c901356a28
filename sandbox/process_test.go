package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSignal(t *testing.T) {
	cases := []struct {
		in      string
		want    Signal
		wantErr error
	}{
		{"TERM", SIGTERM, nil}, {"sigint", SIGINT, nil}, {"SIGKILL", SIGKILL, nil}, {"hup", SIGHUP, nil},
		{"QUIT", SIGQUIT, nil}, {"USR1", SIGUSR1, nil}, {"usr2", SIGUSR2, nil}, {"9", SIGKILL, nil}, {"64", 64, nil},
		{"0", 0, ErrInvalid}, {"65", 0, ErrInvalid}, {"BOGUS", 0, ErrInvalid}, {"", 0, ErrInvalid}, {"-1", 0, ErrInvalid},
	}
	for _, tc := range cases {
		got, err := ParseSignal(tc.in)
		if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if SIGTERM.String() != "TERM" || Signal(20).String() != "20" {
		t.Fatalf("names: %s %s", SIGTERM, Signal(20))
	}
}

func TestProcessSpecValidate(t *testing.T) {
	ok := Argv("true")
	cases := []struct {
		name    string
		spec    ProcessSpec
		wantErr bool
	}{
		{"plain", ProcessSpec{Command: ok}, false},
		{"an ID", ProcessSpec{ID: "dev-server_1", Command: ok}, false},
		{"a dot in the ID", ProcessSpec{ID: "a.b", Command: ok}, true},
		{"a wildcard in the ID", ProcessSpec{ID: "*", Command: ok}, true},
		{"a long ID", ProcessSpec{ID: strings.Repeat("a", 65), Command: ok}, true},
		{"no command", ProcessSpec{}, true},
		{"env without a name", ProcessSpec{Command: ok, Env: []string{"=x"}}, true},
		{"env without =", ProcessSpec{Command: ok, Env: []string{"X"}}, true},
		{"a terminal of no size", ProcessSpec{Command: ok, Terminal: &TerminalSize{Rows: 0, Cols: 80}}, true},
		{"a negative timeout", ProcessSpec{Command: ok, Timeout: -1}, true},
		{"a negative retention", ProcessSpec{Command: ok, Retention: &OutputRetention{Bytes: -1}}, true},
	}
	for _, tc := range cases {
		err := tc.spec.Validate()
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
