package console

import (
	"encoding/json"
	"fmt"
)

// watcherBuffer is how many updates a browser may fall behind before it is cut off; its
// EventSource reconnects and starts again from a snapshot, so a slow tab costs a bounded
// amount of memory and never holds up the others.
const watcherBuffer = 512

// watcher is one browser's stream of updates, already encoded as server-sent events.
type watcher struct {
	ch   chan []byte
	gone chan struct{} // closed when the hub cut the watcher off
}

// hub fans updates out to the watchers. Its methods run under the state's lock.
type hub struct {
	watchers map[*watcher]struct{}
}

func newHub() *hub { return &hub{watchers: map[*watcher]struct{}{}} }

func (h *hub) add() *watcher {
	w := &watcher{ch: make(chan []byte, watcherBuffer), gone: make(chan struct{})}
	h.watchers[w] = struct{}{}
	return w
}

// remove drops w; removing it twice does nothing.
func (h *hub) remove(w *watcher) {
	if _, ok := h.watchers[w]; ok {
		delete(h.watchers, w)
		close(w.gone)
	}
}

// send encodes u once and queues it for every watcher, cutting off those whose buffer is full.
func (h *hub) send(u update) {
	if len(h.watchers) == 0 {
		return
	}
	b, err := sse(u.kind, u.data)
	if err != nil {
		return
	}
	for w := range h.watchers {
		select {
		case w.ch <- b:
		default:
			h.remove(w)
		}
	}
}

// sse encodes one server-sent event: JSON never holds a raw newline, so one data line.
func sse(kind string, data any) ([]byte, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", kind, b), nil
}
