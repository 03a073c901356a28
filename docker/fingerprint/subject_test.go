package fingerprint

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/observation"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
)

var (
	workloadID = strings.Repeat("c", 64)
	observerID = "sha256:" + strings.Repeat("d", 64)
	// observer names the observer image as a caller does (the engine passes images.ObserverTag).
	observer = WithObserverImage("maf-sandbox-test/observer:unit")
)

// fakeEngine answers from scripts: each observation pops the next report (or exit), each
// inspect the next confinement, each change list the next list (the last repeats).
type fakeEngine struct {
	os       string
	confs    []docker.Confinement
	changes  [][]docker.Change
	outputs  []docker.ObserverOutput
	runErr   error
	specs    []docker.ObserverSpec
	image    docker.ImageRecord
	imageErr error
	stats    map[string][]*docker.Entry // each stat of a path pops the next (the last repeats)
}

func next[T any](s *[]T) T {
	v := (*s)[0]
	if len(*s) > 1 {
		*s = (*s)[1:]
	}
	return v
}

func (f *fakeEngine) ServerOS(context.Context) (string, error) { return f.os, nil }
func (f *fakeEngine) InspectConfinement(context.Context, string) (docker.Confinement, error) {
	return next(&f.confs), nil
}
func (f *fakeEngine) Changes(context.Context, string) ([]docker.Change, error) {
	return next(&f.changes), nil
}
func (f *fakeEngine) Stat(_ context.Context, _, p string) (*docker.Entry, error) {
	s, ok := f.stats[p]
	if !ok {
		return nil, nil
	}
	v := next(&s)
	f.stats[p] = s
	return v, nil
}
func (f *fakeEngine) InspectImage(context.Context, string) (docker.ImageRecord, error) {
	return f.image, f.imageErr
}
func (f *fakeEngine) RunObserver(_ context.Context, spec docker.ObserverSpec) (docker.ObserverOutput, error) {
	f.specs = append(f.specs, spec)
	if f.runErr != nil {
		return docker.ObserverOutput{}, f.runErr
	}
	return next(&f.outputs), nil
}

type container struct{}

func (container) ContainerName() string { return "maf-sandbox-docker-test" }
func (container) InstanceID() string    { return workloadID }

func conf() docker.Confinement {
	return docker.Confinement{ID: workloadID, Running: true, StartedAt: "t0", PidMode: "",
		HostsPath: "/var/lib/docker/containers/" + workloadID + "/hosts",
		Labels:    map[string]string{label.Scope: "s", label.Thread: "t", label.Agent: "a", label.Kind: "k", "x": "y"}}
}

// report is a measurement with the engine's /etc/hosts mount, one entry per path given and
// the root filesystem rootfs.
func report(entries map[string]observation.Entry, tmpfs []string, procs ...observation.Process) docker.ObserverOutput {
	return reportOn(rootfs, entries, tmpfs, procs...)
}

// rootfs is a root filesystem of a directory and a file.
var rootfs = map[string]observation.Entry{
	"/":           {Ino: 1, Mode: 0o40755, Nlink: 3, Size: 4096, MtimeNs: 1, CtimeNs: 1},
	"/etc/passwd": {Ino: 7, Mode: 0o100644, Nlink: 1, Size: 30, MtimeNs: 1, CtimeNs: 1},
}

// reportOn is report with the root filesystem root.
func reportOn(root, entries map[string]observation.Entry, tmpfs []string, procs ...observation.Process) docker.ObserverOutput {
	r := observation.Report{Version: observation.Version, Entries: entries, TmpfsEntries: tmpfs, Processes: procs, RootEntries: root,
		Mounts: []observation.Mount{{Path: "/etc/hosts", Root: "/var/lib/docker/containers/" + workloadID + "/hosts",
			FSType: "ext4", Source: "/dev/vda", Writable: true}}}
	b, _ := json.Marshal(r)
	return docker.ObserverOutput{Stdout: b}
}

var hosts = observation.Entry{Ino: 5, Mode: 0o100644, Size: 10, MtimeNs: 1, CtimeNs: 1, SHA256: "aa"}

func withCtime(e observation.Entry, c int64) observation.Entry { e.CtimeNs = c; return e }

func newSubject(t *testing.T, f *fakeEngine) *Subject {
	t.Helper()
	if f.image.ID == "" {
		f.image.ID = observerID
	}
	if f.os == "" {
		f.os = "linux"
	}
	s, err := New(t.Context(), f, container{}, observer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSubjectRefuses(t *testing.T) {
	clean := report(map[string]observation.Entry{"/etc/hosts": hosts}, nil)
	cases := []struct {
		name    string
		f       fakeEngine
		wantErr error
		want    string
	}{
		{"a shared PID namespace", fakeEngine{confs: []docker.Confinement{func() docker.Confinement { c := conf(); c.PidMode = "host"; return c }()},
			outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "shares its PID namespace"},
		{"a PID namespace joined to another container", fakeEngine{confs: []docker.Confinement{func() docker.Confinement {
			c := conf()
			c.PidMode = "container:x"
			return c
		}()}, outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "shares its PID namespace"},
		{"a privileged workload", fakeEngine{confs: []docker.Confinement{func() docker.Confinement { c := conf(); c.Privileged = true; return c }()},
			outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "privileged"},
		{"a writable declared mount", fakeEngine{confs: []docker.Confinement{func() docker.Confinement {
			c := conf()
			c.Mounts = []docker.MountPoint{{Type: "volume", Destination: "/data", RW: true}}
			return c
		}()}, outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "writable declared mount at /data"},
		{"a replaced container", fakeEngine{confs: []docker.Confinement{func() docker.Confinement { c := conf(); c.ID = strings.Repeat("e", 64); return c }()},
			outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "not the sandbox's"},
		{"a dirty root filesystem", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{{{Kind: docker.ChangeAdded, Path: "/tmp/x"}}},
			outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "not pristine: the root filesystem changed at /tmp/x"},
		{"the supervisor's binary where no supervisor runs", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{{{Kind: docker.ChangeAdded, Path: "/maf-sandbox-execd"}}},
			outputs: []docker.ObserverOutput{clean}}, sandbox.ErrRefused, "not pristine: the root filesystem changed at /maf-sandbox-execd"},
		{"a dirty tmpfs", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{nil},
			outputs: []docker.ObserverOutput{report(map[string]observation.Entry{}, []string{"/dev/shm/x"})}}, sandbox.ErrRefused, "tmpfs holds /dev/shm/x"},
		{"an exceeded bound", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{nil},
			outputs: []docker.ObserverOutput{{ExitCode: observation.ExitLimit, Stderr: []byte("observer: more than 2 entries")}}}, ErrLimit, "more than 2 entries"},
		{"an exceeded output bound", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{nil},
			runErr: &docker.OutputLimitError{Limit: 1}}, ErrLimit, "byte budget"},
		{"an unreadable measurement", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{nil},
			outputs: []docker.ObserverOutput{{ExitCode: 1, Stderr: []byte("observer: open /dev/x: permission denied")}}}, nil, "permission denied"},
		{"an unobservable writable mount", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{nil},
			outputs: []docker.ObserverOutput{{ExitCode: observation.ExitUnobservable, Stderr: []byte("observer: /data (ext4)")}}}, sandbox.ErrRefused, "/data"},
		{"a malformed report", fakeEngine{confs: []docker.Confinement{conf()}, changes: [][]docker.Change{nil},
			outputs: []docker.ObserverOutput{{Stdout: []byte(`{"version":99}`)}}}, nil, "format 99"},
		{"a restart during the observation", fakeEngine{confs: []docker.Confinement{conf(), func() docker.Confinement { c := conf(); c.StartedAt = "t1"; return c }()},
			changes: [][]docker.Change{nil}, outputs: []docker.ObserverOutput{clean}}, nil, "restarted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newSubject(t, &tc.f).Fingerprint(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("got %v, want %v naming %q", err, tc.wantErr, tc.want)
			}
			var u *UnreadableError
			var r *RefusedError
			if !errors.As(err, &u) && !errors.As(err, &r) {
				t.Fatalf("%T is neither a refusal nor an unreadable measurement", err)
			}
		})
	}
}

func TestSubjectSkipsOtherEngines(t *testing.T) {
	s := newSubject(t, &fakeEngine{os: "windows"})
	results, err := conformance.AssertNothingLeftBehind(t.Context(), s, func(context.Context) error {
		t.Fatal("the call ran on an engine the subject cannot measure")
		return nil
	})
	if err != nil || len(results) != 1 || !results[0].Skipped || results[0].Passed {
		t.Fatalf("got %+v, %v; want one skip that is not a pass", results, err)
	}
}

func TestSubjectCompares(t *testing.T) {
	base := map[string]observation.Entry{"/etc/hosts": hosts, "/dev/null": {Ino: 2, Mode: 0o20666}}
	proc := observation.Process{PID: 1, StartTime: 10, Comm: "sleep", Cmdline: []string{"sleep", "infinity"}}
	cases := []struct {
		name      string
		after     map[string]observation.Entry
		unmanaged bool                         // /etc/hosts is not the engine's mount of this container
		root      map[string]observation.Entry // nil: rootfs unchanged
		procs     []observation.Process
		want      []string
	}{
		{"nothing changed", base, false, nil, nil, nil},
		{"the engine's ctime bump on its own hosts file", map[string]observation.Entry{"/etc/hosts": withCtime(hosts, 9), "/dev/null": base["/dev/null"]}, false, nil, nil, nil},
		{"a ctime bump on a hosts file that is not the engine's", map[string]observation.Entry{"/etc/hosts": withCtime(hosts, 9), "/dev/null": base["/dev/null"]}, true, nil, nil, []string{"/etc/hosts"}},
		{"a changed hosts file", map[string]observation.Entry{"/etc/hosts": {Ino: 5, Mode: 0o100644, Size: 11, MtimeNs: 2, CtimeNs: 2, SHA256: "bb"}, "/dev/null": base["/dev/null"]}, false, nil, nil, []string{"/etc/hosts"}},
		{"a new tmpfs file", map[string]observation.Entry{"/etc/hosts": hosts, "/dev/null": base["/dev/null"], "/dev/shm/x": {Ino: 8}}, false, nil, nil, []string{"/dev/shm/x"}},
		{"a removed entry", map[string]observation.Entry{"/etc/hosts": hosts}, false, nil, nil, []string{"/dev/null"}},
		{"a root file rewritten with its size and mtime put back", base, false, map[string]observation.Entry{
			"/": rootfs["/"], "/etc/passwd": withCtime(rootfs["/etc/passwd"], 5)}, nil, []string{"/etc/passwd"}},
		{"a root directory whose child came and went", base, false, map[string]observation.Entry{
			"/": withCtime(rootfs["/"], 5), "/etc/passwd": rootfs["/etc/passwd"]}, nil, nil},
		{"a new root file", base, false, map[string]observation.Entry{"/": rootfs["/"], "/etc/passwd": rootfs["/etc/passwd"],
			"/ref": {Ino: 9, Mode: 0o100644}}, nil, []string{"/ref"}},
		{"a removed root file", base, false, map[string]observation.Entry{"/": rootfs["/"]}, nil, []string{"/etc/passwd"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := conf()
			if tc.unmanaged {
				c.HostsPath = "/elsewhere/hosts"
			}
			f := &fakeEngine{confs: []docker.Confinement{c}, changes: [][]docker.Change{nil},
				outputs: []docker.ObserverOutput{report(base, nil, proc), report(tc.after, nil, proc)}}
			if tc.root != nil {
				f.outputs[1] = reportOn(tc.root, tc.after, nil, proc)
			}
			s := newSubject(t, f)
			if _, err := s.Fingerprint(t.Context()); err != nil {
				t.Fatal(err)
			}
			got, err := s.Fingerprint(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.ChangedPaths(), tc.want) {
				t.Fatalf("changed %q, want %q", got.ChangedPaths(), tc.want)
			}
			if want := []string{"1:10 sleep [sleep infinity]"}; !slices.Equal(got.RunningPrograms(), want) {
				t.Fatalf("programs %q, want %q", got.RunningPrograms(), want)
			}
			for _, spec := range f.specs {
				if spec.Image != observerID || spec.Target != workloadID || !strings.HasPrefix(spec.Name, ObserverNamePrefix) ||
					!slices.Contains(spec.Labels, label.Label{Key: label.Role, Value: label.RoleObserver}) ||
					!slices.Contains(spec.Labels, label.Label{Key: label.Scope, Value: "s"}) || len(spec.Labels) != 5 {
					t.Fatalf("observer spec %+v: want the image by ID, the workload by ID, the prefix, the role label and the workload's four identity labels alone", spec)
				}
			}
		})
	}
}

func TestNewRefusesAnObserverImageWithVolumes(t *testing.T) {
	_, err := New(t.Context(), &fakeEngine{image: docker.ImageRecord{ID: observerID, Volumes: []string{"/v"}}}, container{}, observer)
	var u *UnreadableError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "volumes") {
		t.Fatalf("got %v, want the image refused for its volumes", err)
	}
	_, err = New(t.Context(), &fakeEngine{imageErr: docker.ErrNotFound}, container{}, observer)
	if !errors.Is(err, docker.ErrNotFound) || !strings.Contains(err.Error(), "engine images build") {
		t.Fatalf("got %v, want the absent image named with how to build it", err)
	}
}

// onBase is a container on a storage base of its own.
type onBase string

func (onBase) ContainerName() string { return "maf-sandbox-docker-test" }
func (onBase) InstanceID() string    { return workloadID }
func (b onBase) WorkDir() string     { return string(b) }

func dir(mode int64, uid int) *docker.Entry {
	return &docker.Entry{Type: docker.EntryDir, Mode: mode, UID: uid, GID: uid}
}

// The storage base the acquire created, and its ancestors, may already be changed at the
// baseline, as directories; the final fingerprint compares their stat instead.
func TestSubjectStorageBase(t *testing.T) {
	clean := report(map[string]observation.Entry{"/etc/hosts": hosts}, nil)
	acquired := []docker.Change{{Kind: docker.ChangeAdded, Path: "/maf-sandbox"}, {Kind: docker.ChangeAdded, Path: "/maf-sandbox/work"}}
	baseStats := func(final ...*docker.Entry) map[string][]*docker.Entry {
		return map[string][]*docker.Entry{"/maf-sandbox": {dir(0o755, 0)}, "/maf-sandbox/work": append([]*docker.Entry{dir(0o755, 1000)}, final...)}
	}
	cases := []struct {
		name     string
		c        Container
		opts     []Option
		changes  [][]docker.Change
		stats    map[string][]*docker.Entry
		want     []string // the final fingerprint's changed paths
		wantBase string   // a refused baseline naming this
	}{
		{name: "the base and its ancestor unchanged since", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired}, stats: baseStats()},
		{name: "a base named by the option", c: container{}, opts: []Option{WithStorageBase("/maf-sandbox/work/")},
			changes: [][]docker.Change{acquired}, stats: baseStats()},
		{name: "a new file under the base", c: onBase("/maf-sandbox/work"),
			changes: [][]docker.Change{acquired, acquired, append(slices.Clone(acquired), docker.Change{Kind: docker.ChangeAdded, Path: "/maf-sandbox/work/x"})},
			stats:   baseStats(), want: []string{"/maf-sandbox/work/x"}},
		{name: "a chmod of the base", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired},
			stats: baseStats(dir(0o777, 1000)), want: []string{"/maf-sandbox/work"}},
		{name: "a setgid bit on the base", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired},
			stats: baseStats(dir(0o2755, 1000)), want: []string{"/maf-sandbox/work"}},
		{name: "a chown of the base", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired},
			stats: baseStats(dir(0o755, 0)), want: []string{"/maf-sandbox/work"}},
		{name: "the base removed", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired},
			stats: baseStats(nil), want: []string{"/maf-sandbox/work"}},
		{name: "the base replaced by a link", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired},
			stats: baseStats(&docker.Entry{Type: docker.EntrySymlink, Mode: 0o777, UID: 1000, GID: 1000}), want: []string{"/maf-sandbox/work"}},
		{name: "another changed path at the baseline", c: onBase("/maf-sandbox/work"),
			changes: [][]docker.Change{append(slices.Clone(acquired), docker.Change{Kind: docker.ChangeAdded, Path: "/tmp/x"})},
			stats:   baseStats(), wantBase: "the root filesystem changed at /tmp/x"},
		{name: "an entry under the base at the baseline", c: onBase("/maf-sandbox/work"),
			changes: [][]docker.Change{append(slices.Clone(acquired), docker.Change{Kind: docker.ChangeAdded, Path: "/maf-sandbox/work/x"})},
			stats:   baseStats(), wantBase: "changed at /maf-sandbox/work/x"},
		{name: "a base that is a file at the baseline", c: onBase("/maf-sandbox/work"), changes: [][]docker.Change{acquired},
			stats:    map[string][]*docker.Entry{"/maf-sandbox": {dir(0o755, 0)}, "/maf-sandbox/work": {{Type: docker.EntryFile, Mode: 0o644}}},
			wantBase: "/maf-sandbox/work, on the path of the storage base /maf-sandbox/work, changed and is a file, not a directory"},
		{name: "no base known", c: container{}, changes: [][]docker.Change{acquired}, stats: baseStats(),
			wantBase: "changed at /maf-sandbox, /maf-sandbox/work"},
		{name: "the base / accepts nothing", c: onBase("/"), changes: [][]docker.Change{acquired}, stats: baseStats(),
			wantBase: "changed at /maf-sandbox, /maf-sandbox/work"},
		{name: "another base", c: onBase("/srv/work"), changes: [][]docker.Change{acquired}, stats: baseStats(),
			wantBase: "changed at /maf-sandbox, /maf-sandbox/work"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeEngine{os: "linux", image: docker.ImageRecord{ID: observerID}, confs: []docker.Confinement{conf()},
				changes: tc.changes, stats: tc.stats, outputs: []docker.ObserverOutput{clean}}
			s, err := New(t.Context(), f, tc.c, append([]Option{observer}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			base, err := s.Fingerprint(t.Context())
			if tc.wantBase != "" {
				if !errors.Is(err, sandbox.ErrRefused) || !strings.Contains(err.Error(), tc.wantBase) {
					t.Fatalf("got %v, want the baseline refused naming %q", err, tc.wantBase)
				}
				return
			}
			if err != nil || len(base.ChangedPaths()) != 0 {
				t.Fatalf("baseline %q, %v; want a pristine one", base.ChangedPaths(), err)
			}
			got, err := s.Fingerprint(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.ChangedPaths(), tc.want) {
				t.Fatalf("changed %q, want %q", got.ChangedPaths(), tc.want)
			}
		})
	}
}

func TestStorageBaseMustBeAbsolute(t *testing.T) {
	f := &fakeEngine{image: docker.ImageRecord{ID: observerID}}
	for _, c := range []struct {
		c    Container
		opts []Option
	}{{container{}, []Option{WithStorageBase("work")}}, {container{}, []Option{WithStorageBase("")}}, {onBase("work"), nil}} {
		var ia *sandbox.InvalidArgumentError
		if _, err := New(t.Context(), f, c.c, append([]Option{observer}, c.opts...)...); !errors.As(err, &ia) {
			t.Fatalf("%+v: got %v, want an invalid argument", c, err)
		}
	}
}

// The observer image is the caller's to name: without it neither a subject nor a factory is
// built, so no default of a higher package is needed here.
func TestObserverImageIsRequired(t *testing.T) {
	f := &fakeEngine{os: "linux", image: docker.ImageRecord{ID: observerID}}
	var ia *sandbox.InvalidArgumentError
	if _, err := New(t.Context(), f, container{}); !errors.As(err, &ia) || !strings.Contains(err.Error(), "WithObserverImage") {
		t.Fatalf("New without an observer image: %v, want an invalid argument naming the option", err)
	}
	if _, err := NewFactory(f); !errors.As(err, &ia) {
		t.Fatalf("NewFactory without an observer image: %v, want an invalid argument", err)
	}
	if _, err := NewFactory(f, observer); err != nil {
		t.Fatal(err)
	}
}
