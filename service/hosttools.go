package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// defaultRunBase is where a run directory goes when neither the request nor the sandbox names
// a storage base: the Docker backend's default.
const defaultRunBase = "/maf-sandbox/work"

// runProgram runs a host-tools program in a sandbox the engine holds (protocol §11), each
// tool answered by a NATS request to the subject the request names for it. The registry is
// built from the request and enforced here: declarations, allowed identities, the call cap
// and the response limits, which may not exceed what the acquire's spec declared.
func runProgram(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIRunProgramRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	spec := h.spec()
	if !spec.Requires.Has(sandbox.HostTools) {
		return nil, &sandbox.InvalidArgumentError{Reason: "run_program: the sandbox was acquired without host_tools among its requires, so the router never admitted host-tool traffic for it"}
	}
	if req.TimeoutMS <= 0 {
		return nil, &messages.BadRequestError{Reason: "run_program needs a positive timeout_ms"}
	}
	base := defaultRunBase
	if spec.WorkDir != nil {
		base = *spec.WorkDir
	} else if b, ok := h.sandbox().(interface{ WorkDir() string }); ok && b.WorkDir() != "" {
		base = b.WorkDir()
	}
	runDir := req.RunDir
	if runDir == "" {
		runDir = hosttools.RandomRunDir(base)
	}
	l, err := hosttools.NewLayout(runDir, req.Program)
	if err != nil {
		return nil, err
	}
	reg, err := s.registryFor(ctx, req, h, spec, l.Dir)
	if err != nil {
		return nil, err
	}
	opts := []hosttools.ProgramOption{hosttools.WithProgramLogger(s.callLog(ctx))}
	if req.PollMS > 0 {
		opts = append(opts, hosttools.WithPollInterval(millis(req.PollMS)))
	}
	if req.Interpreter != "" {
		opts = append(opts, hosttools.WithInterpreter(req.Interpreter))
	}
	run := reg.NewRun(hosttools.WithObserver(s.obs, h.key, h.kind), hosttools.WithCallReport(func(c hosttools.Called) {
		s.callLog(ctx).Debug("host tool called", zap.String("tool", c.Tool), zap.Int("call", c.Number),
			zap.String("refusal", c.Code), zap.String("run", l.Dir))
	}))
	res, err := hosttools.RunProgram(ctx, h.sandbox(), run, l, []byte(req.Source), millis(req.TimeoutMS), opts...)
	if !req.KeepRun {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if rerr := hosttools.ReclaimRun(rctx, h.sandbox(), l, 30*time.Second); rerr != nil {
			s.callLog(ctx).Warn("run_program: reclaim the run directory", zap.String("run", l.Dir), zap.Error(rerr))
		}
		cancel()
	}
	if err != nil {
		return nil, err
	}
	out, err := s.transfers.blob(h.id, res.StdoutBytes)
	if err != nil {
		return nil, err
	}
	return &messages.APIRunProgramResponse{ExitCode: res.ExitCode, Output: out, Note: res.Stderr(), Calls: run.Calls(), RunDir: l.Dir}, nil
}

// registryFor builds the request's registry, each tool a NATS request to its subject.
func (s *Service) registryFor(ctx context.Context, req *messages.APIRunProgramRequest, h *handle, spec sandbox.Spec, runDir string) (*hosttools.Registry, error) {
	opts := []hosttools.Option{hosttools.WithLogger(s.callLog(ctx)), hosttools.WithoutRegistrationWarning()}
	if req.RequireDeclared {
		opts = append(opts, hosttools.WithRequireDeclared())
	}
	if req.AllowedIdentities != nil {
		ids := make([]sandbox.ToolIdentity, 0, len(req.AllowedIdentities))
		for _, id := range req.AllowedIdentities {
			ids = append(ids, sandbox.ToolIdentity(id))
		}
		opts = append(opts, hosttools.WithAllowedIdentities(ids...))
	}
	// Unset, the caps are the acquire's spec's (or a Go registry's defaults).
	calls, limits := hosttools.DefaultMaxCallsPerRun, sandbox.DefaultTransferLimits()
	if agg := spec.HostTools; agg != nil {
		calls, limits = agg.MaxCallsPerRun, agg.ResponseLimits
	}
	if req.MaxCallsPerRun != 0 {
		calls = req.MaxCallsPerRun
	}
	if req.ResponseLimits != nil {
		limits = messages.LimitsFromWire(*req.ResponseLimits)
	}
	// The router admitted this sandbox's traffic for the spec's aggregate; a run may ask for
	// less, never more.
	if agg := spec.HostTools; agg != nil {
		if calls > agg.MaxCallsPerRun || !limits.Within(agg.ResponseLimits) {
			return nil, &sandbox.TransferLimitsNotPermittedError{Backend: backendName(s), Direction: "host-tool responses",
				Asked: limits, Permitted: agg.ResponseLimits,
				Reason: fmt.Sprintf("the run asks %d calls with responses of %s; the acquire's spec admitted %d calls with %s",
					calls, limits, agg.MaxCallsPerRun, agg.ResponseLimits)}
		}
	}
	opts = append(opts, hosttools.WithMaxCallsPerRun(calls), hosttools.WithResponseLimits(limits))
	reg, err := hosttools.NewRegistry(opts...)
	if err != nil {
		return nil, err
	}
	for _, t := range req.Tools {
		if err := s.checkToolSubject(t.Subject); err != nil {
			return nil, err
		}
		decl, err := declarationFromWire(t.Declaration)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		params := make([]hosttools.Param, 0, len(t.Params))
		for _, p := range t.Params {
			params = append(params, hosttools.Param{Name: p.Name, Required: p.Required})
		}
		wait := millis(t.TimeoutMS)
		if wait <= 0 {
			wait = millis(req.TimeoutMS)
		}
		tool := hosttools.Tool{Name: t.Name, Declaration: decl, Params: params, AnyArguments: t.AnyArguments,
			Func: s.remoteTool(t.Name, t.Subject, wait, h, runDir)}
		if err := reg.Register(tool); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// declarationFromWire reads a declaration: nil unless all three legs are present.
func declarationFromWire(w map[string]json.RawMessage) (*hosttools.Declaration, error) {
	if w == nil {
		return nil, nil
	}
	for k := range w {
		if k != "source" && k != "sink" && k != "identity" {
			return nil, &messages.BadRequestError{Reason: fmt.Sprintf("a declaration has source, sink and identity, not %q", k)}
		}
	}
	if len(w) != 3 {
		return nil, nil // a partial declaration is no declaration
	}
	var d hosttools.Declaration
	var src, id *string
	for leg, dst := range map[string]any{"source": &src, "sink": &d.Sink, "identity": &id} {
		if err := json.Unmarshal(w[leg], dst); err != nil {
			return nil, &messages.BadRequestError{Reason: fmt.Sprintf("declaration %s: %v", leg, err)}
		}
	}
	if src != nil {
		v, err := sandbox.ParseSourceIntegrity(*src)
		if err != nil {
			return nil, err
		}
		d.Source = &v
	}
	if id != nil {
		v, err := sandbox.ParseToolIdentity(*id)
		if err != nil {
			return nil, err
		}
		d.Identity = &v
	}
	return &d, nil
}

// checkToolSubject refuses a tool subject the engine must not send requests to (see
// checkOutboundSubject).
func (s *Service) checkToolSubject(subject string) error {
	return s.checkOutboundSubject("tool subject", subject)
}

// errToolFailed is a tool server's failure; the guest hears a generic refusal.
var errToolFailed = errors.New("service: the tool server answered with an error")

// remoteTool is a tool whose body is a NATS request to subject.
func (s *Service) remoteTool(name, subject string, wait time.Duration, h *handle, runDir string) hosttools.Func {
	var calls atomic.Int64
	return func(ctx context.Context, args hosttools.Arguments) (any, error) {
		call := int(calls.Add(1))
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(messages.APIHostToolCall{Type: messages.APIHostToolCallType, Tool: name, Arguments: raw,
			Call: call, RunDir: runDir, Key: messages.KeyToWire(h.key)})
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		msg, err := s.toolRequest(rctx, subject, body)
		if err != nil {
			return nil, err
		}
		if e := msg.Header.Get("Nats-Service-Error"); e != "" {
			return nil, fmt.Errorf("%w: %s (code %s)", errToolFailed, e, msg.Header.Get("Nats-Service-Error-Code"))
		}
		var reply messages.APIHostToolReply
		dec := json.NewDecoder(bytes.NewReader(msg.Data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&reply); err != nil {
			return nil, fmt.Errorf("reply from %s is not a host_tool reply: %w", subject, err)
		}
		switch {
		case reply.Error != "":
			return nil, fmt.Errorf("%w: %s", errToolFailed, reply.Error)
		case reply.Value == nil:
			return nil, fmt.Errorf("reply from %s has neither value nor error", subject)
		}
		return reply.Value, nil
	}
}

// toolRequest sends one request on a subscription of its own, removed when the reply (or the
// wait's end) comes: the engine's connection keeps no response subscription that would
// outlive its endpoints' drain.
func (s *Service) toolRequest(ctx context.Context, subject string, body []byte) (*nats.Msg, error) {
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(subject, inbox, body); err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	if msg.Header.Get("Status") == "503" && len(msg.Data) == 0 {
		return nil, fmt.Errorf("request %s: %w", subject, nats.ErrNoResponders)
	}
	return msg, nil
}
