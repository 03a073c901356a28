package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/moby/moby/client"
)

// Events implements [Containers]. The subscription is live when Events returns (the engine has
// answered the request); it also asks from the moment of the call (since), as `docker events`
// does.
func (a *Engine) Events(ctx context.Context, filter EventFilter) (<-chan Event, error) {
	if err := checkFilters(filter.Labels); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	args := []string{"events", "--filter", "type=container"}
	var b *apiBound
	if err := a.control(ctx, args, func(_ context.Context, bb *apiBound) error { b = bb; return nil }); err != nil {
		return nil, err
	}
	f := apiFilters(filter.Labels)
	f.Add("type", "container")
	for _, n := range filter.Containers {
		f.Add("container", n)
	}
	for _, act := range filter.Actions {
		f.Add("event", act)
	}
	since := time.Now()
	ctx, witness := withSSHWitness(ctx)
	res := b.client.Events(ctx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Unix(), 10) + "." + fmt.Sprintf("%09d", since.Nanosecond()),
		Filters: f,
	})
	events := make(chan Event)
	go func() {
		defer close(events)
		// The client's own goroutine ends by sending on (and closing) res.Err: once that is
		// drained, nothing of this stream is left.
		defer func() {
			for range res.Err {
			}
		}()
		for {
			select {
			case m := <-res.Messages:
				if m.Type != "container" {
					continue
				}
				ev := Event{Action: string(m.Action), ID: m.Actor.ID, Name: m.Actor.Attributes["name"],
					Attributes: m.Actor.Attributes, Time: time.Unix(0, m.TimeNano)}
				select {
				case events <- ev:
				case <-ctx.Done():
					return
				}
			case err := <-res.Err:
				if ctx.Err() != nil {
					return
				}
				end := fmt.Errorf("docker events ended: %w", err)
				if err == nil {
					end = errors.New("docker events ended")
				} else if class := apiClass(err); class != nil {
					end = fmt.Errorf("%w: %w", class, end)
				}
				select {
				case events <- Event{Err: witness.settle("events", end)}:
				case <-ctx.Done():
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return events, nil
}
