package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Sandbox is a sandbox held by a remote engine: every call goes to that engine's own
// subjects under the handle the acquire returned, with the acquire's key in the envelope.
// When that engine is gone, calls fail with an [*messages.EngineUnavailableError] and the
// sandbox must be acquired again.
type Sandbox struct {
	b       *Backend
	id      string
	engine  string
	key     sandbox.Key
	spec    sandbox.Spec
	kind    string
	workDir string
	created bool

	mu       sync.Mutex
	instance string
}

var (
	_ sandbox.Sandbox     = (*Sandbox)(nil)
	_ sandbox.BoundedExec = (*Sandbox)(nil)
	_ sandbox.Fresh       = (*Sandbox)(nil)
)

// InstanceID is the physical identity the engine reported (the container ID for Docker).
func (s *Sandbox) InstanceID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instance
}

// Handle is the handle the engine knows this sandbox by.
func (s *Sandbox) Handle() string { return s.id }

// Engine is the ID of the engine that holds the sandbox.
func (s *Sandbox) Engine() string { return s.engine }

// WorkDir is the storage base the sandbox is bound to, as the engine reported it ("" when
// the backend does not say).
func (s *Sandbox) WorkDir() string { return s.workDir }

// Created reports whether the acquire that returned this handle created the instance.
func (s *Sandbox) Created() bool { return s.created }

// envelope is the envelope of every call: the acquire's key and the handle.
func (s *Sandbox) envelope(typ string) messages.APIEnvelope {
	return messages.APIEnvelope{Type: typ, Key: messages.KeyToWire(s.key), Sandbox: s.id}
}

// call builds a call to this sandbox's engine.
func (s *Sandbox) call(template string, env *messages.APIEnvelope, req, resp any, respType string, extra time.Duration) call {
	return call{subject: messages.Engine(template, s.b.o.prefix, s.engine), env: env, req: req, resp: resp,
		respType: respType, extra: extra, pinned: true, engine: s.engine, repeatable: repeatable[template]}
}

// WriteFile writes content byte-exact: inline when it fits in one message, otherwise in
// upload chunks the engine checks against the content's size and SHA-256 before writing.
func (s *Sandbox) WriteFile(ctx context.Context, path string, content []byte, wd string) error {
	if int64(len(content)) > s.b.maxFileBytes {
		return &sandbox.TransferCapExceededError{Path: path, Cap: "per-file cap", Limit: s.b.maxFileBytes, Actual: int64(len(content))}
	}
	req := &messages.APIWriteFileRequest{APIEnvelope: s.envelope(messages.APIWriteFileRequestType), Path: path, WorkDir: wd}
	sum := sha256Hex(content)
	if len(content) <= s.b.chunkSize {
		req.Content, req.Size, req.SHA256 = content, int64(len(content)), sum
		if req.Content == nil {
			req.Content = []byte{}
		}
	} else {
		upload, err := s.upload(ctx, content)
		if err != nil {
			return err
		}
		req.Upload, req.Size, req.SHA256 = upload, int64(len(content)), sum
	}
	var resp messages.APIWriteFileResponse
	c := s.call(messages.SubjectWriteFileT, &req.APIEnvelope, req, &resp, messages.APIWriteFileResponseType, 0)
	c.repeatable = req.Upload == "" // the first write of an upload consumes it
	return s.b.do(ctx, c)
}

// Exec runs cmd; see [sandbox.Sandbox].
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	return s.exec(ctx, cmd, wd, timeout, 0, nil)
}

// ExecBounded runs cmd with a combined output budget; overflow fails with
// [*sandbox.ExecOutputLimitExceededError].
func (s *Sandbox) ExecBounded(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration, maxOutputBytes int64) (sandbox.ExecResult, error) {
	if maxOutputBytes <= 0 {
		return sandbox.ExecResult{}, &sandbox.InvalidArgumentError{Reason: "max output bytes must be a positive integer"}
	}
	return s.exec(ctx, cmd, wd, timeout, maxOutputBytes, nil)
}

// ExecStream runs cmd as Exec does and calls onOutput with each chunk of stdout ("stdout")
// and stderr ("stderr") as the engine publishes it, in order, from one goroutine, before
// ExecStream returns. The result is authoritative: it carries the whole output even if a
// chunk was lost on the way. Whether chunks arrive while the command runs depends on the
// engine's sandbox (see [sandbox.StreamingExec]).
func (s *Sandbox) ExecStream(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration, onOutput func(stream string, p []byte)) (sandbox.ExecResult, error) {
	if onOutput == nil {
		return sandbox.ExecResult{}, &sandbox.InvalidArgumentError{Reason: "exec stream: the output function is nil"}
	}
	return s.exec(ctx, cmd, wd, timeout, 0, onOutput)
}

func (s *Sandbox) exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration, maxOutput int64, onOutput func(string, []byte)) (sandbox.ExecResult, error) {
	req := &messages.APIExecRequest{APIEnvelope: s.envelope(messages.APIExecRequestType), Argv: cmd.Argv, Shell: cmd.Shell,
		WorkDir: wd, TimeoutMS: durationMS(timeout), MaxOutputBytes: maxOutput}
	var resp messages.APIExecResponse
	c := s.call(messages.SubjectExecT, &req.APIEnvelope, req, &resp, messages.APIExecResponseType, max(timeout, 0))
	var err error
	if onOutput != nil {
		err = s.b.stream(ctx, req, c, &resp.APIExecResult, onOutput)
	} else {
		err = s.b.do(ctx, c)
	}
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	return s.result(ctx, resp.APIExecResult)
}

// result fetches a result's output blobs.
func (s *Sandbox) result(ctx context.Context, r messages.APIExecResult) (sandbox.ExecResult, error) {
	stdout, err := s.fetch(ctx, "stdout", r.Stdout)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	stderr, err := s.fetch(ctx, "stderr", r.Stderr)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	res := sandbox.ExecResult{StdoutBytes: stdout, StderrBytes: stderr, ExitCode: r.ExitCode, ProducerOwnsStderr: r.ProducerOwnsStderr}
	if r.NotStarted != "" {
		// A cause this client does not know (a newer engine's) still says nothing ran.
		if res.NotStarted, err = sandbox.ParseStartFailure(r.NotStarted); err != nil {
			res.NotStarted = sandbox.StartRuntime
		}
	}
	return res, nil
}

// RunCode evaluates code in the guest runtime.
func (s *Sandbox) RunCode(ctx context.Context, code string, timeout time.Duration) (sandbox.ExecResult, error) {
	req := &messages.APIRunCodeRequest{APIEnvelope: s.envelope(messages.APIRunCodeRequestType), Code: code, TimeoutMS: durationMS(timeout)}
	var resp messages.APIRunCodeResponse
	if err := s.b.do(ctx, s.call(messages.SubjectRunCodeT, &req.APIEnvelope, req, &resp, messages.APIRunCodeResponseType, max(timeout, 0))); err != nil {
		return sandbox.ExecResult{}, err
	}
	return s.result(ctx, resp.APIExecResult)
}

// StatFile describes path without following its last component; (nil, nil) when absent.
func (s *Sandbox) StatFile(ctx context.Context, path, wd string) (*sandbox.FileStat, error) {
	req := &messages.APIStatFileRequest{APIEnvelope: s.envelope(messages.APIStatFileRequestType), Path: path, WorkDir: wd}
	var resp messages.APIStatFileResponse
	if err := s.b.do(ctx, s.call(messages.SubjectStatFileT, &req.APIEnvelope, req, &resp, messages.APIStatFileResponseType, 0)); err != nil {
		return nil, err
	}
	st, err := messages.StatFromWire(resp.Stat)
	if err != nil {
		return nil, &sandbox.ProtocolError{Backend: s.b.name, Reason: "stat reply: " + err.Error()}
	}
	return st, nil
}

// ReadFile returns a regular file's bytes, fetched in chunks when large and checked against
// the size and SHA-256 the engine reported; above maxBytes it fails with
// [*sandbox.TransferCapExceededError].
func (s *Sandbox) ReadFile(ctx context.Context, path, wd string, maxBytes int64) ([]byte, error) {
	req := &messages.APIReadFileRequest{APIEnvelope: s.envelope(messages.APIReadFileRequestType), Path: path, WorkDir: wd, MaxBytes: maxBytes}
	var resp messages.APIReadFileResponse
	if err := s.b.do(ctx, s.call(messages.SubjectReadFileT, &req.APIEnvelope, req, &resp, messages.APIReadFileResponseType, 0)); err != nil {
		return nil, err
	}
	if resp.Content.Size > maxBytes {
		return nil, &sandbox.TransferCapExceededError{Path: path, Cap: "max bytes", Limit: maxBytes, Actual: resp.Content.Size}
	}
	return s.fetch(ctx, path, resp.Content)
}

// Remove deletes path; absent is success.
func (s *Sandbox) Remove(ctx context.Context, path, wd string, recursive bool) error {
	req := &messages.APIRemoveRequest{APIEnvelope: s.envelope(messages.APIRemoveRequestType), Path: path, WorkDir: wd, Recursive: recursive}
	var resp messages.APIRemoveResponse
	return s.b.do(ctx, s.call(messages.SubjectRemoveT, &req.APIEnvelope, req, &resp, messages.APIRemoveResponseType, 0))
}

// ListDir lists a directory's immediate children.
func (s *Sandbox) ListDir(ctx context.Context, path, wd string) ([]sandbox.FileStat, error) {
	req := &messages.APIListDirRequest{APIEnvelope: s.envelope(messages.APIListDirRequestType), Path: path, WorkDir: wd}
	var resp messages.APIListDirResponse
	if err := s.b.do(ctx, s.call(messages.SubjectListDirT, &req.APIEnvelope, req, &resp, messages.APIListDirResponseType, 0)); err != nil {
		return nil, err
	}
	out := make([]sandbox.FileStat, 0, len(resp.Entries))
	for i := range resp.Entries {
		st, err := messages.StatFromWire(&resp.Entries[i])
		if err != nil {
			return nil, &sandbox.ProtocolError{Backend: s.b.name, Reason: "list reply: " + err.Error()}
		}
		out = append(out, *st)
	}
	return out, nil
}

// Reclaim removes a framework-created directory below wd within timeout.
func (s *Sandbox) Reclaim(ctx context.Context, dir, wd string, timeout time.Duration) error {
	req := &messages.APIReclaimRequest{APIEnvelope: s.envelope(messages.APIReclaimRequestType), Dir: dir, WorkDir: wd, TimeoutMS: durationMS(timeout)}
	var resp messages.APIReclaimResponse
	return s.b.do(ctx, s.call(messages.SubjectReclaimT, &req.APIEnvelope, req, &resp, messages.APIReclaimResponseType, max(timeout, 0)))
}

// Reset restores the baseline and takes the new instance ID the engine reports.
func (s *Sandbox) Reset(ctx context.Context, timeout time.Duration) error {
	req := &messages.APIResetRequest{APIEnvelope: s.envelope(messages.APIResetRequestType), TimeoutMS: durationMS(timeout)}
	var resp messages.APIResetResponse
	if err := s.b.do(ctx, s.call(messages.SubjectResetT, &req.APIEnvelope, req, &resp, messages.APIResetResponseType, max(timeout, 0))); err != nil {
		return err
	}
	s.mu.Lock()
	s.instance = resp.InstanceID
	s.mu.Unlock()
	return nil
}

// CollectOutputs collects the outputs the acquire's spec declares, plus callTimeOutputs,
// on the engine (one call, with the phases and errors of [sandbox.CollectOutputs]), then
// delivers the landing ones to sink in declaration order. A Deliver error stops the
// delivery and is returned, wrapped, with the artifacts landed before it. With a nil sink
// the collection runs here, through this sandbox's calls, so the protocol's refusal of
// landing outputs without a sink is what comes back.
func (s *Sandbox) CollectOutputs(ctx context.Context, sink *sandbox.OutputSink, callTimeOutputs []sandbox.DeclaredOutput) ([]sandbox.LandedArtifact, error) {
	if sink == nil || sink.Deliver == nil {
		return sandbox.CollectOutputs(ctx, s, s.spec, sink, callTimeOutputs)
	}
	req := &messages.APICollectOutputsRequest{APIEnvelope: s.envelope(messages.APICollectOutputsRequestType),
		CallTimeOutputs: messages.OutputsToWire(callTimeOutputs), Normalization: string(sink.Normalization)}
	var resp messages.APICollectOutputsResponse
	if err := s.b.do(ctx, s.call(messages.SubjectCollectOutputsT, &req.APIEnvelope, req, &resp, messages.APICollectOutputsResponseType, 0)); err != nil {
		return nil, err
	}
	contents := make([][]byte, len(resp.Artifacts))
	for i, a := range resp.Artifacts {
		data, err := s.fetch(ctx, a.Name, a.Content)
		if err != nil {
			return nil, err
		}
		contents[i] = data
	}
	landed := make([]sandbox.LandedArtifact, 0, len(resp.Artifacts))
	for i, a := range resp.Artifacts {
		la, err := sink.Deliver(ctx, sandbox.Artifact{Name: a.Name, Content: contents[i], Kind: a.Kind, MediaType: a.MediaType})
		if err != nil {
			return landed, fmt.Errorf("deliver output %q: %w", a.Name, err)
		}
		landed = append(landed, la)
	}
	return landed, nil
}

func durationMS(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		return 1 // a positive timeout stays positive
	}
	return ms
}
