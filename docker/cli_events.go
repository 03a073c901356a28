package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// eventDoc is one line of `docker events --format {{json .}}`.
type eventDoc struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	Actor  struct {
		ID         string            `json:"ID"`
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	TimeNano int64 `json:"timeNano"`
}

// maxEventLine bounds one event line (labels travel in the attributes).
const maxEventLine = 1 << 20

// Events implements [Engine]. The stream starts from the moment of the call (--since), so events
// that happen while the client is still connecting are not lost.
func (c *cliDriver) Events(ctx context.Context, filter EventFilter) (<-chan Event, error) {
	if err := checkFilters(filter.Labels); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	b, err := c.ensureBound(ctx)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	args := []string{"events", "--format", "{{json .}}",
		"--since", strconv.FormatInt(since.Unix(), 10) + "." + fmt.Sprintf("%09d", since.Nanosecond()),
		"--filter", "type=container"}
	args = append(args, filterArgs(filter.Labels)...)
	for _, n := range filter.Containers {
		args = append(args, "--filter", "container="+n)
	}
	for _, a := range filter.Actions {
		args = append(args, "--filter", "event="+a)
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("events: stdout pipe: %w", err)
	}
	cmd := exec.Command(b.bin, append(append([]string(nil), b.contextArgs...), args...)...)
	cmd.Env = b.env
	cmd.Stdout = outW
	var stderr limitedBuffer
	stderr.max = 64 << 10
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%w: start docker events: %w", ErrUnreachable, err)
	}
	outW.Close()
	ch := &child{cmd: cmd, waited: make(chan error, 1)}
	events := make(chan Event)
	stopWatch := make(chan struct{})
	go func() {
		// Whoever ends first, ctx or the stream, the child is killed and reaped here.
		select {
		case <-ctx.Done():
			ch.kill()
			outR.Close()
		case <-stopWatch:
		}
	}()
	go func() {
		defer close(events)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
		for sc.Scan() {
			var doc eventDoc
			if err := json.Unmarshal(sc.Bytes(), &doc); err != nil || doc.Type != "container" {
				continue
			}
			ev := Event{Action: doc.Action, ID: doc.Actor.ID, Name: doc.Actor.Attributes["name"],
				Attributes: doc.Actor.Attributes, Time: time.Unix(0, doc.TimeNano)}
			select {
			case events <- ev:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
		}
		scanErr := sc.Err()
		close(stopWatch)
		ch.kill()
		outR.Close()
		ch.reap()
		<-ch.waited
		if ctx.Err() != nil {
			return
		}
		end := fmt.Errorf("docker events ended: exit %d: %s", cmd.ProcessState.ExitCode(), strings.TrimSpace(stderr.String()))
		if cls := classify(args, "", stderr.Bytes()); cls != nil {
			end = fmt.Errorf("%w: %w", cls, end)
		}
		if scanErr != nil {
			end = fmt.Errorf("%w (read: %v)", end, scanErr)
		}
		select {
		case events <- Event{Err: end}:
		case <-ctx.Done():
		}
	}()
	return events, nil
}

// limitedBuffer keeps the first max bytes written to it and discards the rest.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.buf.Bytes()...)
}

func (l *limitedBuffer) String() string { return string(l.Bytes()) }
