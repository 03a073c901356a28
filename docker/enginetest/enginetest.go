// Package enginetest is the suite every implementation of the docker engine seam answers
// against a real Docker engine: one set of named subtests, so the CLI and any later engine-API
// implementation are held to the same behaviour.
//
// Its subtests sit in files by what they hold the engine to: containers.go (lifecycle),
// labels.go, exec.go, files.go (the tar plane), events.go and fingerprinting.go.
//
// It is test code: it imports testing and internal/dockertest, and only tests import it.
package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// callTimeout bounds each engine call the suite makes.
const callTimeout = 60 * time.Second

// Run runs the suite under t.Run(name). newEngine must return an engine bound to the test
// daemon that writes [dockertest.Labels] on every container it creates (docker.Config.Labels),
// so that whatever a failed test leaves behind is swept by its TestMain.
func Run(t *testing.T, name string, newEngine func(t *testing.T) docker.Engine) {
	t.Run(name, func(t *testing.T) {
		image := dockertest.Busybox(t)
		s := &suite{image: image, newEngine: newEngine}
		for _, tc := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"Bind", s.testBind},
			{"ServerOS", s.testServerOS},
			{"ImageExists", s.testImageExists},
			{"RunInspect", s.testRunInspect},
			{"RunConflict", s.testRunConflict},
			{"Rename", s.testRename},
			{"LabelsSelect", s.testLabelsSelect},
			{"Absent", s.testAbsent},
			{"Remove", s.testRemove},
			{"RemoveConcurrent", s.testRemoveConcurrent},
			{"StartStopped", s.testStartStopped},
			{"PauseUnpause", s.testPauseUnpause},
			{"PauseBusy", s.testPauseBusy},
			{"Exec", s.testExec},
			{"ExecOutputLimit", s.testExecOutputLimit},
			{"ExecCancel", s.testExecCancel},
			{"ExecOutput", s.testExecOutput},
			{"CopyInStatRead", s.testCopyInStatRead},
			{"StatKinds", s.testStatKinds},
			{"ReadCap", s.testReadCap},
			{"Events", s.testEvents},
			{"Fingerprinting", s.testFingerprinting},
		} {
			t.Run(tc.name, tc.fn)
		}
	})
}

type suite struct {
	image     string
	newEngine func(t *testing.T) docker.Engine
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// Key returns a key no other test shares.
func Key(t testing.TB) sandbox.Key {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return sandbox.Key{Scope: "enginetest", ThreadID: t.Name() + "-" + hex.EncodeToString(b), AgentID: "agent"}
}

// Workload creates a workload container for key with the labels and hardening a real acquire
// uses, plus opts, and returns its name and ID. Its removal is registered before the create.
func Workload(t testing.TB, e docker.Engine, image string, key sandbox.Key, opts ...docker.CreateOpt) (string, string) {
	t.Helper()
	name := docker.ContainerName(key, "busybox", "")
	labels, err := label.Workload(key, "busybox", map[string]string{"suite": "enginetest"}, "/maf-sandbox/work")
	if err != nil {
		t.Fatal(err)
	}
	all := append(docker.DefaultConfig().WorkloadOpts(), docker.WithLabels(labels...))
	spec := docker.NewCreateSpec(name, image, append(all, opts...)...)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if _, err := e.Remove(c, name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	})
	id, err := e.Run(ctx(t), spec)
	if err != nil {
		t.Fatalf("run %s: %v", name, err)
	}
	return name, id
}
