package service

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// transfers holds the uploads and downloads in progress: bytes that do not fit in one NATS
// message. Both are bound to the handle they were made for, count against one memory
// budget, and are dropped when idle past the ttl.
type transfers struct {
	chunk  int   // raw bytes of one chunk, and the largest inline payload
	maxLen int64 // the largest file
	budget int64
	ttl    time.Duration

	mu        sync.Mutex
	held      int64
	uploads   map[string]*upload // by handle + "/" + upload ID
	downloads map[string]*download
}

type upload struct {
	handle string
	data   []byte
	next   int
	seen   time.Time
}

type download struct {
	handle string
	data   []byte
	chunks int
	seen   time.Time
}

func newTransfers(chunk int, maxLen, budget int64, ttl time.Duration) *transfers {
	return &transfers{chunk: chunk, maxLen: maxLen, budget: budget, ttl: ttl,
		uploads: map[string]*upload{}, downloads: map[string]*download{}}
}

// blob describes data for a response: inline when it fits in one chunk, otherwise held as
// a download bound to handle. It fails with an [*EngineUnavailableError] when the transfer
// budget is spent.
func (t *transfers) blob(handle string, data []byte) (messages.APIBlob, error) {
	sum := sha256.Sum256(data)
	b := messages.APIBlob{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	if len(data) <= t.chunk {
		b.Data = data
		return b, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held+int64(len(data)) > t.budget {
		return messages.APIBlob{}, &messages.EngineUnavailableError{Subject: "download", Reason: fmt.Sprintf(
			"the engine holds %d bytes of transfers and may hold %d; fetch or wait for the transfers in progress", t.held, t.budget)}
	}
	t.held += int64(len(data))
	b.Transfer = nuid.Next()
	b.Chunks = (len(data) + t.chunk - 1) / t.chunk
	t.downloads[b.Transfer] = &download{handle: handle, data: data, chunks: b.Chunks, seen: time.Now()}
	return b, nil
}

// fetch returns chunk seq of the download id made for handle, and whether it is the last;
// fetching the last releases the download.
func (t *transfers) fetch(handle, id string, seq int) ([]byte, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.downloads[id]
	if d == nil || d.handle != handle {
		return nil, false, &messages.BadRequestError{Reason: fmt.Sprintf("no transfer %q for this sandbox: it was fetched, expired or never existed", id)}
	}
	if seq < 0 || seq >= d.chunks {
		return nil, false, &messages.BadRequestError{Reason: fmt.Sprintf("transfer %q has chunks 0 to %d, not %d", id, d.chunks-1, seq)}
	}
	start := seq * t.chunk
	end := min(start+t.chunk, len(d.data))
	last := seq == d.chunks-1
	d.seen = time.Now()
	chunk := d.data[start:end]
	if last {
		delete(t.downloads, id)
		t.held -= int64(len(d.data))
	}
	return chunk, last, nil
}

// add appends chunk seq of upload id for handle. Chunks arrive in order from 0; the whole
// may not pass the file limit.
func (t *transfers) add(handle, id string, seq int, data []byte) (int64, error) {
	if !messages.ValidToken(id) {
		return 0, &messages.BadRequestError{Reason: fmt.Sprintf("upload ID %q must be 1-64 letters, digits, '-' or '_'", id)}
	}
	if len(data) > t.chunk {
		return 0, &messages.BadRequestError{Reason: fmt.Sprintf("upload chunk of %d bytes exceeds the engine's chunk size of %d", len(data), t.chunk)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := handle + "/" + id
	u := t.uploads[k]
	if u == nil {
		if seq != 0 {
			return 0, &messages.BadRequestError{Reason: fmt.Sprintf("upload %q starts with chunk %d, not 0 (or it expired)", id, seq)}
		}
		u = &upload{handle: handle}
		t.uploads[k] = u
	}
	if seq != u.next {
		t.dropUpload(k)
		return 0, &messages.BadRequestError{Reason: fmt.Sprintf("upload %q got chunk %d where %d was due; the upload is dropped", id, seq, u.next)}
	}
	size := int64(len(u.data)) + int64(len(data))
	if size > t.maxLen {
		t.dropUpload(k)
		return 0, &sandbox.TransferCapExceededError{Cap: "per-file cap", Limit: t.maxLen, Actual: size}
	}
	if t.held+int64(len(data)) > t.budget {
		t.dropUpload(k)
		return 0, &messages.EngineUnavailableError{Subject: "upload_chunk", Reason: fmt.Sprintf(
			"the engine holds %d bytes of transfers and may hold %d; the upload is dropped, send it again later", t.held, t.budget)}
	}
	t.held += int64(len(data))
	u.data = append(u.data, data...)
	u.next++
	u.seen = time.Now()
	return size, nil
}

// take removes upload id of handle and returns its bytes.
func (t *transfers) take(handle, id string) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := handle + "/" + id
	u := t.uploads[k]
	if u == nil {
		return nil, &messages.BadRequestError{Reason: fmt.Sprintf("no upload %q for this sandbox: it was used, expired or never started", id)}
	}
	t.dropUpload(k)
	return u.data, nil
}

func (t *transfers) dropUpload(k string) {
	if u := t.uploads[k]; u != nil {
		t.held -= int64(len(u.data))
		delete(t.uploads, k)
	}
}

// forget drops every transfer of the handles ids.
func (t *transfers) forget(ids []string) {
	if len(ids) == 0 {
		return
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, u := range t.uploads {
		if set[u.handle] {
			t.dropUpload(k)
		}
	}
	for k, d := range t.downloads {
		if set[d.handle] {
			t.held -= int64(len(d.data))
			delete(t.downloads, k)
		}
	}
}

// expire drops the transfers idle since before now - ttl and returns how many.
func (t *transfers) expire(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, u := range t.uploads {
		if now.Sub(u.seen) > t.ttl {
			t.dropUpload(k)
			n++
		}
	}
	for k, d := range t.downloads {
		if now.Sub(d.seen) > t.ttl {
			t.held -= int64(len(d.data))
			delete(t.downloads, k)
			n++
		}
	}
	return n
}

// checkIntegrity compares data with the size and lower-case hex SHA-256 a writer declared;
// an empty sum is not checked (inline content only).
func checkIntegrity(data []byte, size int64, sum string) error {
	if size != 0 && int64(len(data)) != size {
		return &messages.BadRequestError{Reason: fmt.Sprintf("integrity check failed: %d bytes arrived, %d were declared; nothing was written", len(data), size)}
	}
	if sum != "" {
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			return &messages.BadRequestError{Reason: "integrity check failed: the content's sha256 does not match the declared one; nothing was written"}
		}
	}
	return nil
}
