package docker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/label"
)

const (
	invID1 = "1111111111111111111111111111111111111111111111111111111111111111"
	invID2 = "2222222222222222222222222222222222222222222222222222222222222222"
)

func TestInventoryListIDs(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		network bool
		want    []string
		wantErr error
		wantArg string
	}{
		{"containers", []string{"FAKE_ps_EXIT=0", "FAKE_ps_STDOUT=" + invID1 + "\n" + invID2 + "\n"}, false, []string{invID1, invID2}, nil,
			"ps -a --no-trunc -q --filter label=maf-sandbox.agent --filter label=maf-sandbox.kind --filter label=maf-sandbox.scope=s --filter label=maf-sandbox.thread"},
		{"networks", []string{"FAKE_network_EXIT=0", "FAKE_network_STDOUT=" + invID2 + "\n"}, true, []string{invID2}, nil, "network ls --no-trunc -q"},
		{"empty listing", []string{"FAKE_ps_EXIT=0"}, false, nil, nil, ""},
		{"a short ID is an unreadable answer", []string{"FAKE_ps_EXIT=0", "FAKE_ps_STDOUT=abc\n"}, false, nil, errUnreadable, ""},
		{"unreachable daemon", []string{"FAKE_ps_EXIT=1", "FAKE_ps_STDERR=Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?"}, false, nil, ErrUnreachable, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, logPath := newFakeCLI(t, tc.env...)
			var got []string
			var err error
			if tc.network {
				got, err = c.ListNetworkIDs(context.Background(), label.IdentityFilter("s"))
			} else {
				got, err = c.ListContainerIDs(context.Background(), label.IdentityFilter("s"))
			}
			switch {
			case tc.wantErr == errUnreadable:
				if err == nil || !strings.Contains(err.Error(), "unreadable answer") {
					t.Fatalf("err %v, want an unreadable answer", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ids %v, want %v", got, tc.want)
			}
			if tc.wantArg != "" {
				if log := strings.Join(readLog(t, logPath), "\n"); !strings.Contains(log, tc.wantArg) {
					t.Fatalf("invocations %s, want %q", log, tc.wantArg)
				}
			}
		})
	}
}

var errUnreadable = errors.New("unreadable")

func TestInventoryInspect(t *testing.T) {
	net := `{"Name":"maf-sandbox-docker-0123456789ab-net","Id":"` + invID1 + `","Created":"2026-11-29T18:58:49.273255854Z","Labels":{"maf-sandbox.scope":"s"},"Containers":{"` + invID2 + `":{"Name":"x"}}}`
	c, _ := newFakeCLI(t, "FAKE_network_EXIT=0", "FAKE_network_STDOUT="+net)
	r, err := c.InspectNetworkID(context.Background(), invID1)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != invID1 || r.Name != "maf-sandbox-docker-0123456789ab-net" || r.Created != "2026-11-29T18:58:49.273255854Z" ||
		r.Labels[label.Scope] != "s" || !slices.Equal(r.Containers, []string{invID2}) {
		t.Fatalf("record %+v", r)
	}
	ctr := `{"Id":"` + invID2 + `","Name":"/maf-sandbox-docker-0123456789ab","Created":"2026-11-29T18:58:49Z","State":{"Running":true},"Config":{"Labels":null}}`
	c, _ = newFakeCLI(t, "FAKE_container_EXIT=0", "FAKE_container_STDOUT="+ctr)
	r, err = c.InspectContainerID(context.Background(), invID2)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != invID2 || r.Name != "maf-sandbox-docker-0123456789ab" || !r.Running || r.Labels == nil {
		t.Fatalf("record %+v", r)
	}
	c, _ = newFakeCLI(t, "FAKE_container_EXIT=1", "FAKE_container_STDERR=Error: No such object: "+invID2)
	if _, err := c.InspectContainerID(context.Background(), invID2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	c, _ = newFakeCLI(t, "FAKE_container_EXIT=0", "FAKE_container_STDOUT={garbled")
	if _, err := c.InspectContainerID(context.Background(), invID2); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("garbled: %v", err)
	}
}

func TestInventoryRefusesNonIDs(t *testing.T) {
	c, logPath := newFakeCLI(t)
	for _, ref := range []string{"", "maf-sandbox-docker-0123456789ab", invID1[:12], "-f", strings.Repeat("A", 64)} {
		if _, err := c.InspectContainerID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("inspect %q: %v", ref, err)
		}
		if _, err := c.RemoveNetworkID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("remove network %q: %v", ref, err)
		}
		if _, err := c.RemoveContainerID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("remove container %q: %v", ref, err)
		}
	}
	if log := readLog(t, logPath); len(log) > 1 || log[0] != "" {
		t.Fatalf("engine calls %v", log)
	}
}

func TestInventoryRemoveNetwork(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		want    RemoveOutcome
		wantErr error
	}{
		{"removed", []string{"FAKE_network_EXIT=0", "FAKE_network_STDOUT=" + invID1 + "\n"}, Removed, nil},
		{"absent", []string{"FAKE_network_EXIT=1", "FAKE_network_STDERR=Error response from daemon: network " + invID1 + " not found"}, Absent, nil},
		{"active endpoints is a failure, not absence", []string{"FAKE_network_EXIT=1",
			"FAKE_network_STDERR=Error response from daemon: error while removing network: network x id " + invID1 + " has active endpoints"}, 0, errAny},
		{"unreachable", []string{"FAKE_network_EXIT=1", "FAKE_network_STDERR=Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?"}, 0, ErrUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, logPath := newFakeCLI(t, tc.env...)
			got, err := c.RemoveNetworkID(context.Background(), invID1)
			switch {
			case tc.wantErr == errAny:
				var ce *CommandError
				if !errors.As(err, &ce) || ce.Class != nil {
					t.Fatalf("err %v, want an unclassified command error", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("outcome %v, want %v", got, tc.want)
			}
			if log := strings.Join(readLog(t, logPath), "\n"); !strings.Contains(log, "network rm "+invID1) || strings.Contains(log, " -f") {
				t.Fatalf("invocations %s", log)
			}
		})
	}
}

var errAny = errors.New("any")

func TestEngineID(t *testing.T) {
	c, _ := newFakeCLI(t, "FAKE_info_EXIT=0", "FAKE_info_STDOUT=ABCD:EFGH\n")
	if id, err := c.EngineID(context.Background()); err != nil || id != "ABCD:EFGH" {
		t.Fatalf("id %q %v", id, err)
	}
	c, _ = newFakeCLI(t, "FAKE_info_EXIT=0", "FAKE_info_STDOUT=")
	if _, err := c.EngineID(context.Background()); err == nil {
		t.Fatal("empty answer accepted")
	}
}
