package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Content up to the chunk size is written inline; larger content goes in upload chunks, in
// order under one upload ID, and the write names that upload with the whole content's size
// and SHA-256. Content over the engine's file cap is refused before any request.
func TestWriteFileInlineAndInChunks(t *testing.T) {
	f := newFakeEngine(t)
	sb := f.acquired(f.client())
	received := int64(0)
	f.handle(f.engine(messages.SubjectUploadChunkT), func(m *nats.Msg) any {
		var req messages.APIUploadChunkRequest
		_ = json.Unmarshal(m.Data, &req)
		received += int64(len(req.Data))
		return &messages.APIUploadChunkResponse{APIResponse: messages.APIResponse{Type: messages.APIUploadChunkResponseType}, Received: received}
	})
	f.handle(f.engine(messages.SubjectWriteFileT), reply(response(messages.APIWriteFileResponseType)))

	if err := sb.WriteFile(ctxT(t), "small", []byte("abcd"), "."); err != nil {
		t.Fatal(err)
	}
	w := decode[messages.APIWriteFileRequest](t, f.requests(f.engine(messages.SubjectWriteFileT))[0])
	if string(w.Content) != "abcd" || w.Upload != "" || w.Size != 4 || w.SHA256 != sha([]byte("abcd")) || w.Sandbox != "h1" {
		t.Fatalf("inline write %+v", w)
	}
	if len(f.requests(f.engine(messages.SubjectUploadChunkT))) != 0 {
		t.Fatalf("inline content was uploaded")
	}

	content := []byte("hello, world")
	if err := sb.WriteFile(ctxT(t), "big", content, "."); err != nil {
		t.Fatal(err)
	}
	chunks := f.requests(f.engine(messages.SubjectUploadChunkT))
	if len(chunks) != 3 {
		t.Fatalf("%d upload chunks of %d bytes, want 3", len(chunks), fakeChunkSize)
	}
	var joined []byte
	for i, m := range chunks {
		c := decode[messages.APIUploadChunkRequest](t, m)
		if c.Seq != i || c.Upload == "" || c.Upload != decode[messages.APIUploadChunkRequest](t, chunks[0]).Upload {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		joined = append(joined, c.Data...)
	}
	w = decode[messages.APIWriteFileRequest](t, f.requests(f.engine(messages.SubjectWriteFileT))[1])
	if string(joined) != string(content) || w.Content != nil || w.Upload != decode[messages.APIUploadChunkRequest](t, chunks[0]).Upload ||
		w.Size != int64(len(content)) || w.SHA256 != sha(content) {
		t.Fatalf("chunked write %+v of %q", w, joined)
	}

	before := f.total()
	err := sb.WriteFile(ctxT(t), "huge", make([]byte, fakeMaxFile+1), ".")
	var tc *sandbox.TransferCapExceededError
	if !errors.As(err, &tc) || tc.Limit != fakeMaxFile || tc.Actual != fakeMaxFile+1 || f.total() != before {
		t.Fatalf("write over the file cap = %v after %d requests, want a refusal before any", err, f.total()-before)
	}
}

// An upload the engine acknowledges short breaks the protocol.
func TestUploadAcknowledgedShort(t *testing.T) {
	f := newFakeEngine(t)
	sb := f.acquired(f.client())
	f.handle(f.engine(messages.SubjectUploadChunkT), reply(&messages.APIUploadChunkResponse{
		APIResponse: messages.APIResponse{Type: messages.APIUploadChunkResponseType}, Received: 1}))
	err := sb.WriteFile(ctxT(t), "big", []byte("hello, world"), ".")
	var pe *sandbox.ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *sandbox.ProtocolError", err)
	}
}

// A read left on the engine as a transfer is fetched chunk by chunk and checked against its
// size and SHA-256; one that fails the check, or ends early, breaks the protocol; one over the
// caller's cap is refused.
func TestReadFileFetchesAndChecksATransfer(t *testing.T) {
	content := []byte("hello, world")
	parts := [][]byte{content[:4], content[4:8], content[8:]}
	cases := []struct {
		name     string
		blob     messages.APIBlob
		lastAt   int // the chunk whose reply says last
		maxBytes int64
		want     string
		wantErr  func(error) bool
	}{
		{name: "inline", blob: messages.APIBlob{Data: content, Size: 12, SHA256: sha(content)}, maxBytes: 100, want: string(content)},
		{name: "in chunks", blob: messages.APIBlob{Transfer: "t1", Chunks: 3, Size: 12, SHA256: sha(content)}, lastAt: 2,
			maxBytes: 100, want: string(content)},
		{name: "empty", blob: messages.APIBlob{Size: 0, SHA256: sha(nil)}, maxBytes: 100, want: ""},
		{name: "a wrong digest", blob: messages.APIBlob{Transfer: "t1", Chunks: 3, Size: 12, SHA256: sha([]byte("other"))}, lastAt: 2,
			maxBytes: 100, wantErr: isProtocol},
		{name: "a transfer that ends early", blob: messages.APIBlob{Transfer: "t1", Chunks: 3, Size: 12, SHA256: sha(content)}, lastAt: 1,
			maxBytes: 100, wantErr: isProtocol},
		{name: "over the caller's cap", blob: messages.APIBlob{Data: content, Size: 12, SHA256: sha(content)}, maxBytes: 5,
			wantErr: func(err error) bool {
				var tc *sandbox.TransferCapExceededError
				return errors.As(err, &tc) && tc.Limit == 5 && tc.Actual == 12
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			sb := f.acquired(f.client())
			f.handle(f.engine(messages.SubjectReadFileT), reply(&messages.APIReadFileResponse{
				APIResponse: messages.APIResponse{Type: messages.APIReadFileResponseType}, Content: tc.blob}))
			f.handle(f.engine(messages.SubjectDownloadChunkT), func(m *nats.Msg) any {
				var req messages.APIDownloadChunkRequest
				_ = json.Unmarshal(m.Data, &req)
				return &messages.APIDownloadChunkResponse{APIResponse: messages.APIResponse{Type: messages.APIDownloadChunkResponseType},
					Data: parts[req.Seq], Last: req.Seq == tc.lastAt}
			})
			got, err := sb.ReadFile(ctxT(t), "f", ".", tc.maxBytes)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("read = %q, %v", got, err)
				}
				return
			}
			if err != nil || string(got) != tc.want || got == nil {
				t.Fatalf("read = %q (nil %v), %v; want %q", got, got == nil, err, tc.want)
			}
			read := decode[messages.APIReadFileRequest](t, f.requests(f.engine(messages.SubjectReadFileT))[0])
			if read.Path != "f" || read.MaxBytes != tc.maxBytes || read.Sandbox != "h1" {
				t.Fatalf("read request %+v", read)
			}
			for i, m := range f.requests(f.engine(messages.SubjectDownloadChunkT)) {
				if d := decode[messages.APIDownloadChunkRequest](t, m); d.Transfer != "t1" || d.Seq != i {
					t.Fatalf("download %d: %+v", i, d)
				}
			}
		})
	}
}

func isProtocol(err error) bool {
	var pe *sandbox.ProtocolError
	return errors.As(err, &pe)
}

// An exec carries its command, working directory, timeout (a positive one stays positive in
// milliseconds) and output budget; the client refuses a bad budget or a nil stream function
// without a request.
func TestExecRequest(t *testing.T) {
	f := newFakeEngine(t)
	sb := f.acquired(f.client())
	out := []byte("hi\n")
	f.handle(f.engine(messages.SubjectExecT), reply(&messages.APIExecResponse{
		APIResponse:   messages.APIResponse{Type: messages.APIExecResponseType},
		APIExecResult: messages.APIExecResult{ExitCode: 3, Stdout: messages.APIBlob{Data: out, Size: 3, SHA256: sha(out)}, Stderr: messages.APIBlob{SHA256: sha(nil)}}}))

	res, err := sb.Exec(ctxT(t), sandbox.Argv("echo", "hi"), "sub", 500*time.Microsecond)
	if err != nil || res.ExitCode != 3 || res.Stdout() != "hi\n" {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	req := decode[messages.APIExecRequest](t, f.requests(f.engine(messages.SubjectExecT))[0])
	if strings.Join(req.Argv, " ") != "echo hi" || req.Shell != "" || req.WorkDir != "sub" || req.TimeoutMS != 1 || req.MaxOutputBytes != 0 || req.StreamTo != "" {
		t.Fatalf("exec request %+v", req)
	}
	if _, err := sb.ExecBounded(ctxT(t), sandbox.Shell("true"), ".", time.Second, 10); err != nil {
		t.Fatal(err)
	}
	req = decode[messages.APIExecRequest](t, f.requests(f.engine(messages.SubjectExecT))[1])
	if req.Shell != "true" || req.TimeoutMS != 1000 || req.MaxOutputBytes != 10 {
		t.Fatalf("bounded exec request %+v", req)
	}

	before := f.total()
	if _, err := sb.ExecBounded(ctxT(t), sandbox.Shell("true"), ".", time.Second, 0); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a zero budget = %v, want the invalid-argument family", err)
	}
	if _, err := sb.ExecStream(ctxT(t), sandbox.Shell("true"), ".", time.Second, nil); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a nil stream function = %v, want the invalid-argument family", err)
	}
	if f.total() != before {
		t.Fatalf("a refused exec sent a request")
	}
}

// A streamed exec names a fresh inbox; the chunks the engine publishes there reach the
// caller in order before ExecStream returns, and the result still carries the whole output.
func TestExecStreamDeliversTheChunks(t *testing.T) {
	f := newFakeEngine(t)
	sb := f.acquired(f.client())
	out := []byte("ab")
	f.handle(f.engine(messages.SubjectExecT), func(m *nats.Msg) any {
		var req messages.APIExecRequest
		_ = json.Unmarshal(m.Data, &req)
		for i, c := range []messages.APIExecChunk{{Stream: "stdout", Data: []byte("a")}, {Stream: "stderr", Data: []byte("!")}, {Stream: "stdout", Data: []byte("b")}} {
			c.Type, c.Seq = messages.APIExecChunkType, i
			data, _ := json.Marshal(c)
			if err := f.nc.Publish(req.StreamTo, data); err != nil {
				t.Errorf("publish chunk: %v", err)
			}
		}
		_ = f.nc.Publish(req.StreamTo, []byte(`{"type":"not a chunk"}`))
		return &messages.APIExecResponse{APIResponse: messages.APIResponse{Type: messages.APIExecResponseType},
			APIExecResult: messages.APIExecResult{Chunks: 3, Stdout: messages.APIBlob{Data: out, Size: 2, SHA256: sha(out)},
				Stderr: messages.APIBlob{Data: []byte("!"), Size: 1, SHA256: sha([]byte("!"))}}}
	})
	var got []string
	res, err := sb.ExecStream(ctxT(t), sandbox.Shell("x"), ".", time.Second, func(stream string, p []byte) {
		got = append(got, stream+":"+string(p))
	})
	if err != nil || res.Stdout() != "ab" {
		t.Fatalf("exec stream = %+v, %v", res, err)
	}
	if strings.Join(got, ",") != "stdout:a,stderr:!,stdout:b" {
		t.Fatalf("chunks %v", got)
	}
	req := decode[messages.APIExecRequest](t, f.requests(f.engine(messages.SubjectExecT))[0])
	if !strings.HasPrefix(req.StreamTo, "_INBOX.") {
		t.Fatalf("stream_to %q, want a fresh inbox", req.StreamTo)
	}
}

// Reset takes the instance ID the engine reports.
func TestResetTakesTheNewInstance(t *testing.T) {
	f := newFakeEngine(t)
	sb := f.acquired(f.client())
	f.handle(f.engine(messages.SubjectResetT), reply(&messages.APIResetResponse{
		APIResponse: messages.APIResponse{Type: messages.APIResetResponseType}, InstanceID: "i2"}))
	if err := sb.Reset(ctxT(t), time.Second); err != nil || sb.InstanceID() != "i2" {
		t.Fatalf("reset = %v, instance %q", err, sb.InstanceID())
	}
	if req := decode[messages.APIResetRequest](t, f.requests(f.engine(messages.SubjectResetT))[0]); req.TimeoutMS != 1000 || req.Sandbox != "h1" {
		t.Fatalf("reset request %+v", req)
	}
}
