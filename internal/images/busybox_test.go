package images_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// TestBusyboxImage checks, in a container, what the engine and the tests rely on.
func TestBusyboxImage(t *testing.T) {
	image := dockertest.Busybox(t)
	id := dockertest.RunContainer(t, image)

	need := "sh ash cat printf echo mkdir mv rm rmdir ln ls nohup setsid kill sleep id pwd true false " +
		"test [ env chmod chown touch stat head tail wc dd seq od tr sed grep find ps wget nc nslookup " +
		"date expr yes cp readlink uname whoami sync"
	cases := []struct {
		name string
		user string
		cmd  string
		want string
	}{
		{name: "root", cmd: "id -u; id -un", want: "0\nroot"},
		{name: "sandbox user", user: "sandbox", cmd: "id -u; id -g; id -un; echo $HOME", want: "1000\n1000\nsandbox\n/home/sandbox"},
		{name: "sandbox home", user: "sandbox", cmd: "cd && stat -c '%u:%g %a' . && touch f && rm f && echo ok", want: "1000:1000 755\nok"},
		{name: "tmp", user: "sandbox", cmd: "stat -c %a /tmp && touch /tmp/f && rm /tmp/f && echo ok", want: "1777\nok"},
		{name: "root home", cmd: "stat -c '%u %a' /root", want: "0 700"},
		{name: "applets", cmd: "for a in " + need + "; do command -v $a >/dev/null || echo missing $a; done", want: ""},
		{name: "nohup ignores hangup", cmd: "nohup sh -c 'kill -HUP $$; echo alive' </dev/null 2>/dev/null", want: "alive"},
		{name: "nohup passes status", cmd: "nohup sh -c 'exit 3' </dev/null >/dev/null 2>&1; echo $?", want: "3"},
		{name: "env where scripts look", cmd: "/usr/bin/env echo ok", want: "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"exec"}
			if tc.user != "" {
				args = append(args, "--user", tc.user)
			}
			args = append(args, id, "sh", "-c", tc.cmd)
			if got := dockertest.Docker(t, args...); got != tc.want {
				t.Fatalf("%s: got %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}

	cfg := dockertest.Docker(t, "image", "inspect", "--format", "{{json .Config.Cmd}} {{json .Config.Labels}}", image)
	if want := `["/bin/sh"] {"` + images.LabelTestImage + `":"busybox"}`; cfg != want {
		t.Fatalf("image config %s, want %s", cfg, want)
	}
}

// TestBuildBusybox builds the image afresh under a tag of its own, since the cached image
// means EnsureBusybox seldom builds, and checks that EnsureBusybox then leaves it alone.
func TestBuildBusybox(t *testing.T) {
	dockertest.Require(t)
	tag := "maf-sandbox-test/busybox:build-" + dockertest.Process()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, _, err := dockertest.DockerErr(ctx, "image", "rm", "--force", tag); err != nil {
			t.Errorf("remove image: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	if err := images.BuildBusybox(ctx, "docker", tag); err != nil {
		t.Fatalf("BuildBusybox: %v", err)
	}
	built := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", tag)
	noticed := false
	if err := images.EnsureBusybox(ctx, "docker", tag, images.WithBuildNotice(func() { noticed = true })); err != nil {
		t.Fatalf("EnsureBusybox: %v", err)
	}
	if noticed {
		t.Fatal("EnsureBusybox gave notice of a build with the image present")
	}
	if got := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", tag); got != built {
		t.Fatalf("EnsureBusybox rebuilt a present image: %s, was %s", got, built)
	}
	id := dockertest.RunContainer(t, tag)
	if got := dockertest.Docker(t, "exec", id, "echo", "ok"); got != "ok" {
		t.Fatalf("echo in the built image: %q", got)
	}
}

func TestBuildBusyboxFails(t *testing.T) {
	dockertest.Require(t)
	cases := []struct {
		name    string
		docker  string
		tag     string
		wantErr string
	}{
		{name: "no docker CLI", docker: "/nonexistent/docker", tag: "maf-sandbox-test/busybox:never", wantErr: "import"},
		{name: "invalid tag", docker: "docker", tag: "Not A Tag", wantErr: "import Not A Tag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := images.BuildBusybox(t.Context(), tc.docker, tc.tag)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("BuildBusybox() error = %v, want one containing %q", err, tc.wantErr)
			}
			t.Logf("BuildBusybox() error: %v", err)
		})
	}
}
