package dockertest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/images"
)

func TestRequire(t *testing.T) {
	cases := []struct {
		name    string
		noHost  bool   // point the CLI at a socket nobody listens on
		require string // value of MAF_SANDBOX_REQUIRE_DOCKER
		want    string // outcome: "", "skip" or "fatal"
	}{
		{name: "daemon answers", want: ""},
		{name: "daemon answers, required", require: "1", want: ""},
		{name: "no daemon", noHost: true, want: "skip"},
		{name: "no daemon, required", noHost: true, require: "1", want: "fatal"},
		{name: "no daemon, only 1 requires", noHost: true, require: "true", want: "skip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.noHost {
				t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-daemon.sock"))
			} else {
				Require(t) // this case needs the real daemon
			}
			t.Setenv(EnvRequireDocker, tc.require)
			r := &recorder{TB: t}
			r.run(Require)
			if r.outcome != tc.want {
				t.Fatalf("Require: outcome %q (%s), want %q", r.outcome, r.msg, tc.want)
			}
			if tc.want != "" && !strings.Contains(r.msg, "docker daemon does not answer") {
				t.Fatalf("Require: message %q does not give the reason", r.msg)
			}
		})
	}
}

func TestBusybox(t *testing.T) {
	if got := Busybox(t); got != images.BusyboxTag {
		t.Fatalf("Busybox() = %q, want %q", got, images.BusyboxTag)
	}
	got := Docker(t, "image", "inspect", "--format", "{{index .Config.Labels \""+images.LabelTestImage+"\"}}", images.BusyboxTag)
	if got != "busybox" {
		t.Fatalf("image label %s = %q, want busybox", images.LabelTestImage, got)
	}
}
