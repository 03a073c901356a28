package reaper

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

const day = 24 * time.Hour

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ids names the resources a case created, so it can say which must be gone and which kept.
type ids map[string]string

func TestReapVectors(t *testing.T) {
	errRefused := &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("Error response from daemon: removal refused")}
	cases := []struct {
		name      string
		setup     func(f *fakeInventory) ids
		opts      []Option
		age       time.Duration
		want      counts
		wantCodes []sandbox.DisposalCode
		gone      []string
		kept      []string
		check     func(t *testing.T, f *fakeInventory, got ids, res sandbox.ReapResult)
	}{
		{
			name: "old workload, proxy and network go (1,1,1) by ID, network last",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, want: counts{1, 1, 1}, gone: []string{"w", "p", "n"},
			check: func(t *testing.T, f *fakeInventory, got ids, _ sandbox.ReapResult) {
				rm := f.removals()
				if len(rm) != 3 || rm[0].ID != got["p"] || rm[1].ID != got["w"] || rm[2] != (call{"rm-network", got["n"]}) {
					t.Fatalf("removals %v, want proxy, workload, then network", rm)
				}
				for _, c := range rm {
					if !hex64.MatchString(c.ID) {
						t.Fatalf("removal addressed %q, not a 64-hex ID", c.ID)
					}
				}
			},
		},
		{
			name: "orphan proxy alone is reaped",
			setup: func(f *fakeInventory) ids {
				_, p, _ := f.topology(base(1), "s", -1, 2*day, -1)
				return ids{"p": p}
			},
			age: day, want: counts{0, 1, 0}, gone: []string{"p"},
		},
		{
			name: "orphan proxy takes its network",
			setup: func(f *fakeInventory) ids {
				_, p, n := f.topology(base(1), "s", -1, 2*day, 2*day)
				return ids{"p": p, "n": n}
			},
			age: day, want: counts{0, 1, 1}, gone: []string{"p", "n"},
		},
		{
			name: "network alone is reaped",
			setup: func(f *fakeInventory) ids {
				_, _, n := f.topology(base(1), "s", -1, -1, 2*day)
				return ids{"n": n}
			},
			age: day, want: counts{0, 0, 1}, gone: []string{"n"},
		},
		{
			name: "workload exactly at the cutoff keeps the whole topology",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", day, 2*day, 2*day)
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, kept: []string{"w", "p", "n"},
		},
		{
			name: "younger workload keeps the whole topology",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", day-time.Nanosecond, 2*day, 2*day)
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, kept: []string{"w", "p", "n"},
		},
		{
			name: "future-dated workload keeps the whole topology",
			setup: func(f *fakeInventory) ids {
				_, p, n := f.topology(base(1), "s", -1, 2*day, 2*day)
				w := f.addWorkload(base(1), t0.Add(time.Hour).Format(time.RFC3339Nano), "future", identity("s"))
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, kept: []string{"w", "p", "n"},
		},
		{
			name: "young rebuilt proxy and network still go with an old workload",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, time.Minute, time.Minute)
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, want: counts{1, 1, 1}, gone: []string{"w", "p", "n"},
		},
		{
			name: "young orphan proxy keeps its old network",
			setup: func(f *fakeInventory) ids {
				_, p, n := f.topology(base(1), "s", -1, time.Minute, 2*day)
				return ids{"p": p, "n": n}
			},
			age: day, kept: []string{"p", "n"},
		},
		{
			name: "nanosecond and offset timestamps parse",
			setup: func(f *fakeInventory) ids {
				l := identity("s")
				w := f.addWorkload(base(1), "2026-04-29T11:59:59.123456789Z", "nano", l)
				p := f.addProxy(base(2)+"-proxy", "2026-04-29T14:00:00+02:00", "offset", l)
				n := f.addNetwork(base(3)+"-net", "2026-04-30T11:59:59.999999999-00:00", "neg-offset", l)
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, want: counts{1, 1, 1}, gone: []string{"w", "p", "n"},
		},
		{
			name: "scope is encoded in the listing: other scopes untouched",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "tenant one/ü", 2*day, 2*day, 2*day)
				ow, op, on := f.topology(base(2), "other", 2*day, 2*day, 2*day)
				return ids{"w": w, "p": p, "n": n, "ow": ow, "op": op, "on": on}
			},
			opts: []Option{WithScope("tenant one/ü")},
			age:  day, want: counts{1, 1, 1}, gone: []string{"w", "p", "n"}, kept: []string{"ow", "op", "on"},
		},
		{
			name: "scope rechecked on an inspected container: mismatch is unlisted, nothing removed",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = func(f *fakeInventory, c call) error {
					if c.Op == "inspect-container" && c.ID == w {
						f.mu.Lock()
						r := f.containers[w]
						r.Labels = withLabel(r.Labels, label.Scope, "other")
						f.containers[w] = r
						f.mu.Unlock()
					}
					return nil
				}
				return ids{"w": w, "p": p, "n": n}
			},
			opts: []Option{WithScope("s")},
			age:  day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "p", "n"},
		},
		{
			name: "scope rechecked on an inspected network: mismatch is unlisted, nothing removed",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = func(f *fakeInventory, c call) error {
					if c.Op == "inspect-network" && c.ID == n {
						f.mu.Lock()
						r := f.networks[n]
						r.Labels = withLabel(r.Labels, label.Scope, "other")
						f.networks[n] = r
						f.mu.Unlock()
					}
					return nil
				}
				return ids{"w": w, "p": p, "n": n}
			},
			opts: []Option{WithScope("s")},
			age:  day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "p", "n"},
		},
		{
			name: "foreign name, missing label, role on a workload name, role missing on a proxy name: untouched",
			setup: func(f *fakeInventory) ids {
				l := identity("s")
				a := f.addWorkload("maf-sandbox-wsl-0123456789ab", ago(2*day), "foreign", l)
				b := f.addWorkload(base(2), ago(2*day), "nolabel", withLabel(l, label.Kind, "\x00delete"))
				c := f.addWorkload(base(3), ago(2*day), "role", withLabel(l, label.Role, label.RoleProxy))
				d := f.addWorkload(base(4)+"-proxy", ago(2*day), "norole", l)
				e := f.addNetwork(base(5), ago(2*day), "netname", l)
				g := f.addWorkload(base(6)+"0", ago(2*day), "long", l)
				h := f.addWorkload(strings.ToUpper(base(7)), ago(2*day), "upper", l)
				return ids{"a": a, "b": b, "c": c, "d": d, "e": e, "g": g, "h": h}
			},
			age: day, kept: []string{"a", "b", "c", "d", "e", "g", "h"},
		},
		{
			name: "a member whose identity differs from the anchor's is not the group's",
			setup: func(f *fakeInventory) ids {
				w := f.addWorkload(base(1), ago(2*day), "w", identity("s"))
				p := f.addProxy(base(1)+"-proxy", ago(2*day), "p", withLabel(identity("s"), label.Thread, "t-2"))
				n := f.addNetwork(base(1)+"-net", ago(2*day), "n", withLabel(identity("s"), label.Agent, "other"))
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, want: counts{1, 0, 0}, gone: []string{"w"}, kept: []string{"p", "n"},
		},
		{
			name: "container listing fails: unlisted, no removals",
			setup: func(f *fakeInventory) ids {
				w, _, _ := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = failOn("list-containers", "", docker.ErrUnreachable)
				return ids{"w": w}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w"},
		},
		{
			name: "network listing times out: unlisted, no removals",
			setup: func(f *fakeInventory) ids {
				w, _, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = failOn("list-networks", "", &docker.TimeoutError{Args: []string{"network", "ls"}, Timeout: time.Second})
				return ids{"w": w, "n": n}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "n"},
		},
		{
			name: "container inspection fails: unlisted, no removals",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.topology(base(2), "s", 2*day, 2*day, 2*day)
				f.hook = failOn("inspect-container", p, errRefused)
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "p", "n"},
			check: func(t *testing.T, f *fakeInventory, _ ids, _ sandbox.ReapResult) {
				if rm := f.removals(); len(rm) != 0 {
					t.Fatalf("removals %v after an inventory failure", rm)
				}
			},
		},
		{
			name: "network inspection times out (the sweep's own call bound): unlisted, no removals",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = func(_ *fakeInventory, c call) error {
					if c.Op == "inspect-network" {
						return context.DeadlineExceeded
					}
					return nil
				}
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "p", "n"},
		},
		{
			name: "bad Created (a date alone) is unlisted",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.addWorkload(base(2), "2026-01-01", "dateonly", identity("s"))
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "p", "n"},
		},
		{
			name: "zero Created is unlisted",
			setup: func(f *fakeInventory) ids {
				w, _, _ := f.topology(base(1), "s", 2*day, -1, -1)
				f.addNetwork(base(2)+"-net", "0001-01-01T00:00:00Z", "zero", identity("s"))
				return ids{"w": w}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w"},
		},
		{
			name: "Created without a zone is unlisted",
			setup: func(f *fakeInventory) ids {
				w, _, _ := f.topology(base(1), "s", 2*day, -1, -1)
				f.addWorkload(base(2), "2026-01-01T00:00:00", "nozone", identity("s"))
				return ids{"w": w}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w"},
		},
		{
			name: "empty Id in the inspection is unlisted",
			setup: func(f *fakeInventory) ids {
				w, _, _ := f.topology(base(1), "s", 2*day, -1, -1)
				bad := f.addWorkload(base(2), ago(2*day), "noid", identity("s"))
				r := f.containers[bad]
				r.ID = ""
				f.containers[bad] = r
				return ids{"w": w}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w"},
		},
		{
			name: "mismatched Id in the inspection is unlisted",
			setup: func(f *fakeInventory) ids {
				w, _, n := f.topology(base(1), "s", 2*day, -1, 2*day)
				r := f.networks[n]
				r.ID = fakeID("someone else")
				f.networks[n] = r
				return ids{"w": w}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w"},
		},
		{
			name: "a resource gone between listing and inspection is simply dropped",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = func(f *fakeInventory, c call) error {
					if c.Op == "inspect-container" && c.ID == p {
						f.mu.Lock()
						delete(f.containers, p)
						f.mu.Unlock()
					}
					return nil
				}
				return ids{"w": w, "n": n}
			},
			age: day, want: counts{1, 0, 1}, gone: []string{"w", "n"},
		},
		{
			name: "same-name replacement survives the old ID's removal",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = func(f *fakeInventory, c call) error {
					// After revalidation, the old workload is replaced under its name.
					if c.Op == "rm-container" && c.ID == w {
						f.mu.Lock()
						delete(f.containers, w)
						f.mu.Unlock()
						f.addWorkloadLocked(base(1), ago(0), "replacement", identity("s"))
					}
					return nil
				}
				return ids{"w": w, "p": p, "n": n, "repl": fakeID("replacement")}
			},
			// The old ID is absent at removal: the group stops (no count), the network stays.
			age: day, want: counts{0, 1, 0}, gone: []string{"w", "p"}, kept: []string{"repl", "n"},
		},
		{
			name: "topology replaced between inventories survives",
			setup: func(f *fakeInventory) ids {
				w, p, _ := f.topology(base(1), "s", 2*day, 2*day, -1)
				f.hook = func(f *fakeInventory, c call) error {
					if c.Op == "list-networks" {
						f.mu.Lock()
						delete(f.containers, w)
						delete(f.containers, p)
						f.mu.Unlock()
						f.addWorkloadLocked(base(1), ago(0), "new-w", identity("s"))
						f.addNetworkLocked(base(1)+"-net", ago(0), "new-n", identity("s"))
					}
					return nil
				}
				return ids{"nw": fakeID("new-w"), "nn": fakeID("new-n")}
			},
			age: day, kept: []string{"nw", "nn"},
			check: func(t *testing.T, f *fakeInventory, _ ids, _ sandbox.ReapResult) {
				if rm := f.removals(); len(rm) != 0 {
					t.Fatalf("removals %v: the anchor was gone at revalidation", rm)
				}
			},
		},
		{
			name: "replacement network captured by the listing survives loss of the old anchor",
			setup: func(f *fakeInventory) ids {
				w, _, _ := f.topology(base(1), "s", 2*day, -1, -1)
				f.hook = func(f *fakeInventory, c call) error {
					if c.Op == "list-networks" {
						f.mu.Lock()
						delete(f.containers, w)
						f.mu.Unlock()
						f.addNetworkLocked(base(1)+"-net", ago(0), "new-n", identity("s"))
					}
					return nil
				}
				return ids{"nn": fakeID("new-n")}
			},
			age: day, kept: []string{"nn"},
		},
		{
			name: "replacement network survives a silent rm -f absence of the old workload",
			setup: func(f *fakeInventory) ids {
				w, _, n := f.topology(base(1), "s", 2*day, -1, day/2)
				f.silentAbsent[w] = true
				return ids{"w": w, "n": n}
			},
			age: day, kept: []string{"n"},
			check: func(t *testing.T, f *fakeInventory, got ids, res sandbox.ReapResult) {
				if rm := f.removals(); len(rm) != 1 || rm[0].ID != got["w"] {
					t.Fatalf("removals %v, want only the workload's", rm)
				}
				if len(res.Failures) != 0 || countsOf(res) != (counts{}) {
					t.Fatalf("absence counted as %v with failures %v", countsOf(res), res.Failures)
				}
			},
		},
		{
			name: "unreadable anchor revalidation: no removals at all",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				w2, _, _ := f.topology(base(2), "s", 2*day, -1, -1)
				seen := 0
				f.hook = func(_ *fakeInventory, c call) error {
					if c.Op == "inspect-container" && c.ID == w2 {
						if seen++; seen == 2 {
							return errors.New("garbled answer")
						}
					}
					return nil
				}
				return ids{"w": w, "p": p, "n": n, "w2": w2}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted}, kept: []string{"w", "p", "n", "w2"},
		},
		{
			name: "revalidation answering another ID: no removals at all",
			setup: func(f *fakeInventory) ids {
				_, _, n := f.topology(base(1), "s", -1, -1, 2*day)
				seen := 0
				f.hook = func(f *fakeInventory, c call) error {
					if c.Op == "inspect-network" {
						if seen++; seen == 2 {
							f.mu.Lock()
							r := f.networks[n]
							r.ID = fakeID("x")
							f.networks[n] = r
							f.mu.Unlock()
						}
					}
					return nil
				}
				return ids{"n": n}
			},
			age: day, wantCodes: []sandbox.DisposalCode{sandbox.DisposalUnlisted},
		},
		{
			name: "per-resource refused failures don't stop other groups",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				w2, p2, n2 := f.topology(base(2), "s", 2*day, 2*day, 2*day)
				f.hook = failOn("rm-container", p, errRefused)
				return ids{"w": w, "p": p, "n": n, "w2": w2, "p2": p2, "n2": n2}
			},
			age: day, want: counts{1, 1, 1}, wantCodes: []sandbox.DisposalCode{sandbox.DisposalRefused},
			gone: []string{"w2", "p2", "n2"}, kept: []string{"w", "p", "n"},
			check: func(t *testing.T, _ *fakeInventory, got ids, res sandbox.ReapResult) {
				f := res.Failures[0]
				if f.ResourceID != got["p"] || f.ResourceKind != sandbox.ReapProxy || !strings.HasPrefix(f.Detail, base(1)+"-proxy: ") {
					t.Fatalf("failure %+v", f)
				}
			},
		},
		{
			name: "workload removal timeout and unreachable codes; network untouched",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				w2, _, n2 := f.topology(base(2), "s", 2*day, -1, 2*day)
				f.hook = func(_ *fakeInventory, c call) error {
					switch {
					case c.Op == "rm-container" && c.ID == w:
						return &docker.TimeoutError{Args: []string{"rm"}, Timeout: time.Second}
					case c.Op == "rm-container" && c.ID == w2:
						return docker.ErrUnreachable
					}
					return nil
				}
				return ids{"w": w, "p": p, "n": n, "w2": w2, "n2": n2}
			},
			age: day, want: counts{0, 1, 0}, wantCodes: []sandbox.DisposalCode{sandbox.DisposalTimeout, sandbox.DisposalUnreachable},
			gone: []string{"p"}, kept: []string{"w", "n", "w2", "n2"},
		},
		{
			name: "network with active endpoints is recorded, not forced",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				f.hook = failOn("rm-network", n, &docker.CommandError{Args: []string{"network", "rm"}, ExitCode: 1,
					Stderr: []byte("Error response from daemon: error while removing network: network x has active endpoints")})
				return ids{"w": w, "p": p, "n": n}
			},
			age: day, want: counts{1, 1, 0}, wantCodes: []sandbox.DisposalCode{sandbox.DisposalRefused},
			gone: []string{"w", "p"}, kept: []string{"n"},
		},
		{
			name: "dry run decides and removes nothing",
			setup: func(f *fakeInventory) ids {
				w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
				y, _, _ := f.topology(base(2), "s", time.Hour, -1, -1)
				return ids{"w": w, "p": p, "n": n, "y": y}
			},
			opts: []Option{WithDryRun()},
			age:  day, kept: []string{"w", "p", "n", "y"},
			check: func(t *testing.T, f *fakeInventory, got ids, res sandbox.ReapResult) {
				if rm := f.removals(); len(rm) != 0 {
					t.Fatalf("dry run removed %v", rm)
				}
				want := map[string]sandbox.ReapAction{got["p"]: sandbox.ReapWouldRemove, got["w"]: sandbox.ReapWouldRemove, got["n"]: sandbox.ReapWouldRemove, got["y"]: sandbox.ReapKept}
				if len(res.Resources) != len(want) {
					t.Fatalf("resources %+v", res.Resources)
				}
				for _, d := range res.Resources {
					if want[d.ID] != d.Action {
						t.Fatalf("%s %s: %s, want %s", d.Kind, d.Name, d.Action, want[d.ID])
					}
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			got := tc.setup(f)
			res, err := Reap(context.Background(), f, tc.age, append([]Option{clock()}, tc.opts...)...)
			if err != nil {
				t.Fatalf("Reap: %v", err)
			}
			if countsOf(res) != tc.want {
				t.Fatalf("counts %+v, want %+v (failures %+v)", countsOf(res), tc.want, res.Failures)
			}
			var codes []sandbox.DisposalCode
			for _, fl := range res.Failures {
				codes = append(codes, fl.Code)
			}
			if !slices.Equal(codes, tc.wantCodes) {
				t.Fatalf("failure codes %v, want %v (%+v)", codes, tc.wantCodes, res.Failures)
			}
			if len(tc.wantCodes) > 0 && tc.wantCodes[0] == sandbox.DisposalUnlisted {
				if rm := f.removals(); len(rm) != 0 {
					t.Fatalf("removals %v after an unlisted failure", rm)
				}
			}
			for _, k := range tc.gone {
				if f.exists(got[k]) {
					t.Errorf("%s still exists", k)
				}
			}
			for _, k := range tc.kept {
				if !f.exists(got[k]) {
					t.Errorf("%s was removed", k)
				}
			}
			if tc.check != nil {
				tc.check(t, f, got, res)
			}
		})
	}
}

func (f *fakeInventory) addWorkloadLocked(name, created, seed string, labels map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addWorkload(name, created, seed, labels)
}

func (f *fakeInventory) addNetworkLocked(name, created, seed string, labels map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addNetwork(name, created, seed, labels)
}

// failOn answers err to the call op on id ("" for any id).
func failOn(op, id string, err error) func(*fakeInventory, call) error {
	return func(_ *fakeInventory, c call) error {
		if c.Op == op && (id == "" || c.ID == id) {
			return err
		}
		return nil
	}
}

func TestReapRejectsBeforeAnyCall(t *testing.T) {
	cases := []struct {
		name string
		age  time.Duration
		opts []Option
	}{
		{"zero age", 0, nil},
		{"negative age", -time.Second, nil},
		{"empty scope", time.Hour, []Option{WithScope("")}},
		{"zero call timeout", time.Hour, []Option{WithCallTimeout(0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.topology(base(1), "s", 2*day, 2*day, 2*day)
			_, err := Reap(context.Background(), f, tc.age, tc.opts...)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			if len(f.calls) != 0 {
				t.Fatalf("engine calls %v before the refusal", f.calls)
			}
		})
	}
}

// A refused young proxy leaves all three in place; the retry removes (1,1,1).
func TestReapRefusedProxyThenRetry(t *testing.T) {
	f := newFake()
	w, p, n := f.topology(base(1), "s", 2*day, time.Minute, 2*day)
	f.hook = failOn("rm-container", p, &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("refused")})
	d := &fakeDrainer{}
	res, err := Reap(context.Background(), f, day, clock(), WithDrainer(d))
	if err != nil {
		t.Fatal(err)
	}
	if countsOf(res) != (counts{}) || len(res.Failures) != 1 || res.Failures[0].Code != sandbox.DisposalRefused {
		t.Fatalf("first sweep %+v failures %+v", countsOf(res), res.Failures)
	}
	for _, id := range []string{w, p, n} {
		if !f.exists(id) {
			t.Fatalf("%s removed by the refused sweep", id)
		}
	}
	if len(d.published) != 0 {
		t.Fatalf("published %v after a refused removal", d.published)
	}
	f.hook = nil
	res, err = Reap(context.Background(), f, day, clock(), WithDrainer(d))
	if err != nil {
		t.Fatal(err)
	}
	if countsOf(res) != (counts{1, 1, 1}) || len(res.Failures) != 0 {
		t.Fatalf("retry %+v failures %+v", countsOf(res), res.Failures)
	}
	// The drain used the same ID the removals addressed, twice; the window went out once.
	if !slices.Equal(d.drained, []string{p, p}) || !slices.Equal(d.published, []string{p + " removed"}) {
		t.Fatalf("drained %v published %v", d.drained, d.published)
	}
	var rmProxy []string
	for _, c := range f.removals() {
		if c.Op == "rm-container" && c.ID == p {
			rmProxy = append(rmProxy, c.ID)
		}
	}
	if len(rmProxy) != 2 {
		t.Fatalf("proxy removals %v", rmProxy)
	}
}

// A network that failed after its containers went is judged next sweep by its own age.
func TestReapFailedYoungNetworkJudgedByItsOwnAge(t *testing.T) {
	f := newFake()
	_, _, n := f.topology(base(1), "s", 2*day, 2*day, time.Minute)
	f.hook = failOn("rm-network", n, &docker.CommandError{Args: []string{"network", "rm"}, ExitCode: 1, Stderr: []byte("active endpoints")})
	res, err := Reap(context.Background(), f, day, clock())
	if err != nil {
		t.Fatal(err)
	}
	if countsOf(res) != (counts{1, 1, 0}) || len(res.Failures) != 1 {
		t.Fatalf("first sweep %+v %+v", countsOf(res), res.Failures)
	}
	f.hook = nil
	res, err = Reap(context.Background(), f, day, clock())
	if err != nil {
		t.Fatal(err)
	}
	if countsOf(res) != (counts{}) || !f.exists(n) {
		t.Fatalf("young orphan network removed: %+v", countsOf(res))
	}
	res, err = Reap(context.Background(), f, time.Second, clock())
	if err != nil || countsOf(res) != (counts{0, 0, 1}) {
		t.Fatalf("old enough now: %+v %v", countsOf(res), err)
	}
}

// Absent proxy at removal: the window is published (absence counts), the group stops.
func TestReapDrainAbsentPublishes(t *testing.T) {
	f := newFake()
	w, p, _ := f.topology(base(1), "s", 2*day, 2*day, 2*day)
	f.silentAbsent[p] = true
	d := &fakeDrainer{}
	res, err := Reap(context.Background(), f, day, clock(), WithDrainer(d))
	if err != nil {
		t.Fatal(err)
	}
	if countsOf(res) != (counts{}) || !f.exists(w) {
		t.Fatalf("counts %+v; the group must stop at an absent proxy", countsOf(res))
	}
	if !slices.Equal(d.published, []string{p + " absent"}) {
		t.Fatalf("published %v", d.published)
	}
}

func TestReapCancellationPropagates(t *testing.T) {
	f := newFake()
	_, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.hook = func(_ *fakeInventory, c call) error {
		if c.Op == "rm-container" && c.ID == p {
			cancel()
			return context.Canceled
		}
		return nil
	}
	d := &fakeDrainer{}
	res, err := Reap(ctx, f, day, clock(), WithDrainer(d))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if len(d.drained) != 1 || len(d.published) != 0 {
		t.Fatalf("drained %v published %v: an in-flight window is not published", d.drained, d.published)
	}
	if len(res.Failures) != 0 || !f.exists(n) {
		t.Fatalf("failures %+v after cancellation", res.Failures)
	}
	if _, err := Reap(ctx, f, day, clock()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before the call: %v", err)
	}
}

// Every call runs under its own deadline: a hung call fails as timeout, and the sweep goes on.
func TestReapCallsAreBounded(t *testing.T) {
	f := newFake()
	w, p, _ := f.topology(base(1), "s", 2*day, 2*day, -1)
	w2, _, _ := f.topology(base(2), "s", 2*day, -1, -1)
	f.hook = func(_ *fakeInventory, c call) error {
		if c.Op == "rm-container" && c.ID == p {
			time.Sleep(200 * time.Millisecond) // stands in for a hung daemon honouring ctx late
			return context.DeadlineExceeded
		}
		return nil
	}
	res, err := Reap(context.Background(), f, day, clock(), WithCallTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 || res.Failures[0].Code != sandbox.DisposalTimeout || !f.exists(w) || f.exists(w2) {
		t.Fatalf("failures %+v, counts %+v", res.Failures, countsOf(res))
	}
}

// A fingerprint observer an engine left behind is a group of its own, judged by its own age:
// an old one goes (stopped or running), a young one stays, and a container that only looks
// like one (another name, no role label, no identity) is foreign and untouched.
func TestReapObservers(t *testing.T) {
	f := newFake()
	observer := func(name, created, seed string, labels map[string]string) string {
		return f.addWorkload(name, created, seed, labels)
	}
	l := withLabel(identity("s"), label.Role, label.RoleObserver)
	old := observer(docker.ObserverNamePrefix+"0123456789abcdef", ago(2*day), "o1", l)
	f.containers[old] = func(r docker.Resource) docker.Resource { r.Running = true; return r }(f.containers[old])
	young := observer(docker.ObserverNamePrefix+"fedcba9876543210", ago(time.Minute), "o2", l)
	foreign := []string{
		observer("maf-fingerprint-other", ago(2*day), "o3", l),
		observer(docker.ObserverNamePrefix+"1111111111111111", ago(2*day), "o4", identity("s")),
		observer(docker.ObserverNamePrefix+"2222222222222222", ago(2*day), "o5", withLabel(l, label.Thread, "\x00delete")),
	}
	otherScope := observer(docker.ObserverNamePrefix+"3333333333333333", ago(2*day), "o6", withLabel(identity("t"), label.Role, label.RoleObserver))
	w, p, n := f.topology(base(1), "s", 2*day, 2*day, 2*day)

	res, err := Reap(context.Background(), f, day, clock(), WithScope("s"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ObserversRemoved != 1 || countsOf(res) != (counts{1, 1, 1}) || len(res.Failures) != 0 {
		t.Fatalf("observers %d, counts %+v, failures %+v; want the old observer and the old sandbox", res.ObserversRemoved, countsOf(res), res.Failures)
	}
	for _, id := range []string{old, w, p, n} {
		if f.exists(id) {
			t.Fatalf("%s was not removed", id)
		}
	}
	for _, id := range append(foreign, young, otherScope) {
		if !f.exists(id) {
			t.Fatalf("%s was removed", id)
		}
	}
	var kinds []string
	for _, d := range res.Resources {
		if d.Kind == sandbox.ReapObserver {
			kinds = append(kinds, d.Name+" "+string(d.Action))
		}
	}
	want := []string{docker.ObserverNamePrefix + "0123456789abcdef removed", docker.ObserverNamePrefix + "fedcba9876543210 kept"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("observer decisions %q, want %q", kinds, want)
	}
}
