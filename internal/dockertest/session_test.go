package dockertest

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

func TestStartTime(t *testing.T) {
	// Fields 3 to 22 of a real line; field 22 (starttime) is 4242.
	const tail = " S 1 2 3 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 4242 1000 200"
	cases := []struct {
		name    string
		stat    string
		want    string
		wantErr bool
	}{
		{name: "plain", stat: "12 (go)" + tail, want: "4242"},
		{name: "spaces in command", stat: "12 (my test)" + tail, want: "4242"},
		{name: "parentheses in command", stat: "12 (a) b (c))" + tail, want: "4242"},
		{name: "no command", stat: "12 go" + tail, wantErr: true},
		{name: "too short", stat: "12 (go) S 1 2 3", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := startTime(tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("startTime() error = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("startTime() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSession(t *testing.T) {
	hex12 := regexp.MustCompile(`^[0-9a-f]{12}$`)
	for name, id := range map[string]string{"session": Session(), "process": Process()} {
		if !hex12.MatchString(id) {
			t.Errorf("%s id %q is not 12 hex digits", name, id)
		}
	}
	if s1, s2 := Session(), Session(); s1 != s2 {
		t.Fatalf("session id changed between calls: %s, %s", s1, s2)
	}
	if p1, p2 := Process(), Process(); p1 != p2 {
		t.Fatalf("process id changed between calls: %s, %s", p1, p2)
	}
	if Session() == Process() {
		t.Fatal("session and process ids are equal")
	}
	// The session is the parent's id: go test, shared by every package of the run.
	if want := procID(os.Getppid()); Session() != want {
		t.Fatalf("Session() = %s, want procID(ppid) = %s", Session(), want)
	}
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		if _, err := startTime(string(stat)); err != nil {
			t.Fatalf("parse own stat: %v", err)
		}
	}

	labels := Labels()
	if len(labels) != 2 || labels[LabelSession] != Session() || labels[LabelProcess] != Process() {
		t.Fatalf("Labels() = %v", labels)
	}
	wantArgs := []string{
		"--label", LabelProcess + "=" + Process(),
		"--label", LabelSession + "=" + Session(),
	}
	if got := LabelArgs(); !slices.Equal(got, wantArgs) {
		t.Fatalf("LabelArgs() = %q, want %q", got, wantArgs)
	}
}
