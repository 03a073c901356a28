package service

import (
	"context"
	"fmt"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The calls addressed to one sandbox, on the subjects of the engine that holds it. Paths
// are passed to the sandbox as they came: confinement is the sandbox's (sandbox/paths), and
// a path it refuses comes back as its own typed error.

func writeFile(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIWriteFileRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	content := req.Content
	if req.Upload != "" {
		if len(req.Content) > 0 {
			return nil, &messages.BadRequestError{Reason: "a write carries content or names an upload, not both"}
		}
		if req.SHA256 == "" {
			return nil, &messages.BadRequestError{Reason: "a write from an upload needs the content's sha256"}
		}
		if content, err = s.transfers.take(h.id, req.Upload); err != nil {
			return nil, err
		}
	}
	if int64(len(content)) > s.o.maxFileBytes {
		return nil, &sandbox.TransferCapExceededError{Path: req.Path, Cap: "per-file cap", Limit: s.o.maxFileBytes, Actual: int64(len(content))}
	}
	if err := checkIntegrity(content, req.Size, req.SHA256); err != nil {
		return nil, err
	}
	if content == nil {
		content = []byte{}
	}
	if err := h.sandbox().WriteFile(ctx, req.Path, content, req.WorkDir); err != nil {
		return nil, err
	}
	return &messages.APIWriteFileResponse{}, nil
}

func uploadChunk(_ context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIUploadChunkRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	n, err := s.transfers.add(h.id, req.Upload, req.Seq, req.Data)
	if err != nil {
		return nil, err
	}
	return &messages.APIUploadChunkResponse{Received: n}, nil
}

func readFile(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIReadFileRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	// Above the transfer limit the sandbox refuses the file rather than the engine sending it.
	content, err := h.sandbox().ReadFile(ctx, req.Path, req.WorkDir, min(req.MaxBytes, s.o.maxFileBytes))
	if err != nil {
		return nil, err
	}
	blob, err := s.transfers.blob(h.id, content)
	if err != nil {
		return nil, err
	}
	return &messages.APIReadFileResponse{Content: blob}, nil
}

func downloadChunk(_ context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIDownloadChunkRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	chunk, last, err := s.transfers.fetch(h.id, req.Transfer, req.Seq)
	if err != nil {
		return nil, err
	}
	return &messages.APIDownloadChunkResponse{Data: chunk, Last: last}, nil
}

func statFile(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIStatFileRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	st, err := h.sandbox().StatFile(ctx, req.Path, req.WorkDir)
	if err != nil {
		return nil, err
	}
	return &messages.APIStatFileResponse{Stat: messages.StatToWire(st)}, nil
}

func remove(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIRemoveRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := h.sandbox().Remove(ctx, req.Path, req.WorkDir, req.Recursive); err != nil {
		return nil, err
	}
	return &messages.APIRemoveResponse{}, nil
}

func listDir(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIListDirRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	entries, err := h.sandbox().ListDir(ctx, req.Path, req.WorkDir)
	if err != nil {
		return nil, err
	}
	out := &messages.APIListDirResponse{Entries: make([]messages.APIFileStat, len(entries))}
	for i := range entries {
		out.Entries[i] = *messages.StatToWire(&entries[i])
	}
	return out, nil
}

func reclaim(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIReclaimRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := h.sandbox().Reclaim(ctx, req.Dir, req.WorkDir, millis(req.TimeoutMS)); err != nil {
		return nil, err
	}
	return &messages.APIReclaimResponse{}, nil
}

func reset(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIResetRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := h.sandbox().Reset(ctx, millis(req.TimeoutMS)); err != nil {
		return nil, err
	}
	s.handles.reset(h, h.sandbox().InstanceID())
	return &messages.APIResetResponse{InstanceID: h.sandbox().InstanceID()}, nil
}

func collectOutputs(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APICollectOutputsRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	var artifacts []sandbox.Artifact
	sink := &sandbox.OutputSink{
		Normalization: sandbox.NameNormalization(req.Normalization),
		Deliver: func(_ context.Context, a sandbox.Artifact) (sandbox.LandedArtifact, error) {
			artifacts = append(artifacts, a)
			return sandbox.LandedArtifact{Name: a.Name, Display: a.Name}, nil
		},
	}
	if _, err := sandbox.CollectOutputs(ctx, h.sandbox(), h.spec(), sink, messages.OutputsFromWire(req.CallTimeOutputs)); err != nil {
		return nil, err
	}
	out := &messages.APICollectOutputsResponse{Artifacts: make([]messages.APIArtifact, 0, len(artifacts))}
	for _, a := range artifacts {
		blob, err := s.transfers.blob(h.id, a.Content)
		if err != nil {
			return nil, fmt.Errorf("hold artifact %q: %w", a.Name, err)
		}
		out.Artifacts = append(out.Artifacts, messages.APIArtifact{Name: a.Name, Kind: a.Kind, MediaType: a.MediaType, Content: blob})
	}
	return out, nil
}
