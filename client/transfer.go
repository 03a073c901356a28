package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// upload sends content in chunks and returns the upload's ID for the write that follows.
func (s *Sandbox) upload(ctx context.Context, content []byte) (string, error) {
	id := nuid.Next()
	for seq, off := 0, 0; off < len(content); seq++ {
		end := min(off+s.b.chunkSize, len(content))
		req := &messages.APIUploadChunkRequest{APIEnvelope: s.envelope(messages.APIUploadChunkRequestType), Upload: id, Seq: seq, Data: content[off:end]}
		var resp messages.APIUploadChunkResponse
		if err := s.b.do(ctx, s.call(messages.SubjectUploadChunkT, &req.APIEnvelope, req, &resp, messages.APIUploadChunkResponseType, 0)); err != nil {
			return "", fmt.Errorf("upload chunk %d: %w", seq, err)
		}
		if resp.Received != int64(end) {
			return "", &sandbox.ProtocolError{Backend: s.b.name, Reason: fmt.Sprintf("the engine acknowledged %d bytes of an upload after %d were sent", resp.Received, end)}
		}
		off = end
	}
	return id, nil
}

// fetch returns a blob's bytes, downloading a transfer chunk by chunk, and checks them
// against its size and SHA-256.
func (s *Sandbox) fetch(ctx context.Context, what string, blob messages.APIBlob) ([]byte, error) {
	data := blob.Data
	if blob.Transfer != "" {
		data = make([]byte, 0, blob.Size)
		for seq := range blob.Chunks {
			req := &messages.APIDownloadChunkRequest{APIEnvelope: s.envelope(messages.APIDownloadChunkRequestType), Transfer: blob.Transfer, Seq: seq}
			var resp messages.APIDownloadChunkResponse
			if err := s.b.do(ctx, s.call(messages.SubjectDownloadChunkT, &req.APIEnvelope, req, &resp, messages.APIDownloadChunkResponseType, 0)); err != nil {
				return nil, fmt.Errorf("download %s chunk %d: %w", what, seq, err)
			}
			data = append(data, resp.Data...)
			if resp.Last != (seq == blob.Chunks-1) {
				return nil, &sandbox.ProtocolError{Backend: s.b.name, Reason: fmt.Sprintf("the transfer of %s ended at chunk %d of %d", what, seq, blob.Chunks)}
			}
		}
	}
	if int64(len(data)) != blob.Size || sha256Hex(data) != blob.SHA256 {
		return nil, &sandbox.ProtocolError{Backend: s.b.name, Reason: fmt.Sprintf(
			"%s failed its integrity check: %d bytes arrived of %d, or their sha256 differs", what, len(data), blob.Size)}
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// streamWait bounds how long an exec stream waits, after the response, for chunks the
// engine published before it: they were sent first, so they are normally there already.
const streamWait = 10 * time.Second

// stream sends an exec that publishes its output on a fresh inbox (or a fresh subject under
// [WithStreamPrefix]), hands each chunk to
// onOutput in order while the call runs, and returns once the response and every chunk it
// counts have arrived (or streamWait has passed).
func (b *Backend) stream(ctx context.Context, req *messages.APIExecRequest, c call, res *messages.APIExecResult, onOutput func(string, []byte)) error {
	inbox := b.nc.NewInbox()
	if b.o.streamPrefix != "" {
		inbox = b.o.streamPrefix + "." + nuid.Next()
	}
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("subscribe to the exec stream: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req.StreamTo = inbox

	streamCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	progress := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		next := 0
		for {
			m, err := sub.NextMsgWithContext(streamCtx)
			if err != nil {
				return
			}
			var chunk messages.APIExecChunk
			if err := json.Unmarshal(m.Data, &chunk); err != nil || chunk.Type != messages.APIExecChunkType {
				b.log.Debug("exec stream: not a chunk", zap.String("subject", inbox))
				continue
			}
			if chunk.Seq != next {
				b.log.Debug("exec stream: chunks lost", zap.Int("want", next), zap.Int("got", chunk.Seq))
			}
			next = chunk.Seq + 1
			onOutput(chunk.Stream, chunk.Data)
			select {
			case <-progress:
			default:
			}
			progress <- next
		}
	}()

	err = b.do(ctx, c)
	if err == nil && res.Chunks > 0 {
		timer := time.NewTimer(streamWait)
		defer timer.Stop()
	wait:
		for got := 0; got < res.Chunks; {
			select {
			case got = <-progress:
			case <-timer.C:
				b.log.Debug("exec stream: chunks missing after the response", zap.Int("want", res.Chunks))
				break wait
			}
		}
	}
	stop()
	<-done
	return err
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
