package natscluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natscluster"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// TestClusterKeepsR3StreamThroughNodeKill forms a 3-node cluster, puts messages in a stream of
// 3 replicas, kills the stream's leader and shows the two survivors elect another, keep every
// message and take new ones; the killed node, started again empty, catches up.
func TestClusterKeepsR3StreamThroughNodeKill(t *testing.T) {
	c := natscluster.Run(t, 3)
	nc := c.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.Cluster == nil || info.Cluster.Name != c.Name || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster %+v, want a leader and 2 replicas in cluster %s", info.Cluster, c.Name)
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			// A publish acked by JetStream is stored on a quorum; retry across the election.
			for {
				_, err := js.Publish(ctx, "r3.msg", fmt.Appendf(nil, "%d", i), jetstream.WithMsgID(fmt.Sprint(i)))
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	publish(0, 100)

	leader := -1
	for i := range c.Size() {
		if fmt.Sprintf("n%d", i+1) == info.Cluster.Leader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("leader %q is not a node of the cluster", info.Cluster.Leader)
	}
	c.Kill(leader)
	publish(100, 200)

	info = waitInfo(ctx, t, js, "R3", func(in *jetstream.StreamInfo) bool {
		return in.Cluster != nil && in.Cluster.Leader != "" && in.Cluster.Leader != fmt.Sprintf("n%d", leader+1)
	})
	if info.State.Msgs != 200 {
		t.Fatalf("stream holds %d messages after the kill, want 200", info.State.Msgs)
	}

	c.Start(leader)
	waitInfo(ctx, t, js, "R3", func(in *jetstream.StreamInfo) bool {
		if in.Cluster == nil || len(in.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range in.Cluster.Replicas {
			if !r.Current {
				return false
			}
		}
		return true
	})
	if err := js.DeleteStream(ctx, "R3"); err != nil {
		t.Fatalf("delete stream: %v", err)
	}
}

// waitInfo polls the stream's info ([natscluster.StreamInfo]: 5 s a request) until ok
// accepts it.
func waitInfo(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, ok func(*jetstream.StreamInfo) bool) *jetstream.StreamInfo {
	t.Helper()
	var last error
	for ctx.Err() == nil {
		in, err := natscluster.StreamInfo(ctx, js, stream)
		if err == nil && ok(in) {
			return in
		}
		if err != nil {
			last = err
		} else {
			last = errors.New("not yet")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("stream never reached the wanted state: %v", last)
	return nil
}
