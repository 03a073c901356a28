package messages

import (
	"maps"
	"slices"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// The conversions between the wire messages and package sandbox's values. The engine and
// the Go client both use them, so the two ends agree by construction.

// SpecFromWire builds the spec w describes with [sandbox.NewSpec]: omitted fields take the
// protocol's defaults and a bad value is refused with the error NewSpec gives (an
// [*sandbox.InvalidArgumentError] for an unknown egress mode, capability, rung or scope).
func SpecFromWire(w APISpec) (sandbox.Spec, error) {
	opts := append(placementFromWire(w), capabilitiesFromWire(w)...)
	if w.HostTools != nil {
		agg, err := hostToolsFromWire(*w.HostTools)
		if err != nil {
			return sandbox.Spec{}, err
		}
		opts = append(opts, sandbox.WithHostTools(agg))
	}
	opts = append(opts, admissionFromWire(w)...)
	return sandbox.NewSpec(w.Kind, opts...)
}

// placementFromWire is the options of what runs where: image, egress, storage base, labels.
func placementFromWire(w APISpec) []sandbox.SpecOption {
	var opts []sandbox.SpecOption
	add := func(o sandbox.SpecOption) { opts = append(opts, o) }
	if w.Image != "" {
		add(sandbox.WithImage(w.Image))
	}
	if w.ImageID != "" {
		add(sandbox.WithImageID(w.ImageID))
	}
	if w.Egress != "" {
		add(sandbox.WithEgress(sandbox.Egress(w.Egress)))
	}
	if len(w.EgressAllow) > 0 {
		rules := make([]sandbox.EgressRule, len(w.EgressAllow))
		for i, r := range w.EgressAllow {
			rules[i] = sandbox.EgressRule{Host: r.Host, Methods: slices.Clone(r.Methods), Paths: slices.Clone(r.Paths), Shadow: r.Shadow, Authority: r.Authority}
			for _, c := range r.Credentials {
				rules[i].Credentials = append(rules[i].Credentials, sandbox.EgressCredential{Header: c.Header, Env: c.Env,
					Secret: sandbox.Secret(c.Secret), Methods: slices.Clone(c.Methods), Paths: slices.Clone(c.Paths)})
			}
		}
		mode := sandbox.EgressAllowlist
		if w.Egress != "" {
			mode = sandbox.Egress(w.Egress)
		}
		add(sandbox.WithAllowlist(rules...))
		add(sandbox.WithEgress(mode)) // a contradiction stays one for NewSpec to refuse
	}
	if w.WorkDir != nil {
		add(sandbox.WithWorkDir(*w.WorkDir))
	}
	if len(w.Labels) > 0 {
		add(sandbox.WithLabels(w.Labels))
	}
	return opts
}

// capabilitiesFromWire is the options of what the sandbox must offer: capabilities, the
// isolation floor, the declared outputs and transfer limits, the OS family.
func capabilitiesFromWire(w APISpec) []sandbox.SpecOption {
	var opts []sandbox.SpecOption
	add := func(o sandbox.SpecOption) { opts = append(opts, o) }
	if w.Requires != nil {
		caps := make([]sandbox.Capability, len(w.Requires))
		for i, c := range w.Requires {
			caps[i] = sandbox.Capability(c)
		}
		add(sandbox.WithRequires(caps...))
	}
	if w.MinIsolation != nil {
		add(sandbox.WithIsolationFloor(sandbox.Isolation(*w.MinIsolation)))
	}
	if len(w.DeclaredOutputs) > 0 {
		add(sandbox.WithDeclaredOutputs(OutputsFromWire(w.DeclaredOutputs)...))
	}
	if w.FilesIn != nil {
		add(sandbox.WithFilesIn(LimitsFromWire(*w.FilesIn)))
	}
	if w.FilesOut != nil {
		add(sandbox.WithFilesOut(LimitsFromWire(*w.FilesOut)))
	}
	if w.OutputsNamedAtCallTime {
		add(sandbox.WithOutputsNamedAtCallTime())
	}
	if w.RequiresOSFamily != nil {
		add(sandbox.WithRequiresOSFamily(sandbox.OSFamily(*w.RequiresOSFamily)))
	}
	if w.Resources != nil {
		add(sandbox.WithResources(ResourcesFromWire(*w.Resources)))
	}
	return opts
}

// ResourcesFromWire converts wire resource bounds.
func ResourcesFromWire(w APIResources) sandbox.Resources {
	return sandbox.Resources{MemoryBytes: w.MemoryBytes, CPUs: w.CPUs, Pids: w.Pids}
}

func resourcesToWire(r sandbox.Resources) *APIResources {
	return &APIResources{MemoryBytes: r.MemoryBytes, CPUs: r.CPUs, Pids: r.Pids}
}

// admissionFromWire is the options of how the sandbox is admitted and shared: isolation
// scope, cleanup floor, confinement of the guest call path, exclusive admission.
func admissionFromWire(w APISpec) []sandbox.SpecOption {
	var opts []sandbox.SpecOption
	add := func(o sandbox.SpecOption) { opts = append(opts, o) }
	if w.IsolationScope != "" {
		add(sandbox.WithIsolationScope(sandbox.IsolationScope(w.IsolationScope)))
	}
	if w.MinCleanup != nil {
		add(sandbox.WithCleanupFloor(sandbox.Cleanup(*w.MinCleanup)))
	}
	if w.ConfinedToGuestCallPath {
		add(sandbox.WithConfinedToGuestCallPath())
	}
	if w.ExclusiveAdmission {
		add(sandbox.WithExclusiveAdmission())
	}
	if w.Sleep != nil {
		add(sandbox.WithSleep(time.Duration(w.Sleep.PauseAfterMS)*time.Millisecond, time.Duration(w.Sleep.StopAfterMS)*time.Millisecond))
	}
	return opts
}

func hostToolsFromWire(w APIHostTools) (sandbox.HostToolAggregate, error) {
	agg := sandbox.HostToolAggregate{
		OutboundCaps:     slices.Clone(w.OutboundCaps),
		RequiresApproval: w.RequiresApproval,
		HasUndeclared:    w.HasUndeclared,
		ResponseLimits:   LimitsFromWire(w.ResponseLimits),
		MaxCallsPerRun:   w.MaxCallsPerRun,
	}
	if w.ResultIntegrity != nil {
		si, err := sandbox.ParseSourceIntegrity(*w.ResultIntegrity)
		if err != nil {
			return agg, err
		}
		agg.ResultIntegrity = &si
	}
	for _, id := range w.Identities {
		ti, err := sandbox.ParseToolIdentity(id)
		if err != nil {
			return agg, err
		}
		agg.Identities = append(agg.Identities, ti)
	}
	return agg, nil
}

// SpecToWire describes spec on the wire; [SpecFromWire] of the result builds an equal spec.
func SpecToWire(s sandbox.Spec) APISpec {
	w := APISpec{
		Kind:                    s.Kind,
		Image:                   s.Image,
		ImageID:                 s.ImageID,
		Egress:                  string(s.Egress),
		WorkDir:                 cloneString(s.WorkDir),
		Labels:                  maps.Clone(s.Labels),
		Requires:                []string{},
		DeclaredOutputs:         OutputsToWire(s.DeclaredOutputs),
		OutputsNamedAtCallTime:  s.OutputsNamedAtCallTime,
		IsolationScope:          string(s.IsolationScope),
		ConfinedToGuestCallPath: s.ConfinedToGuestCallPath,
		ExclusiveAdmission:      s.ExclusiveAdmission,
	}
	if s.Sleep != nil {
		w.Sleep = &APISleep{PauseAfterMS: s.Sleep.PauseAfter.Milliseconds(), StopAfterMS: s.Sleep.StopAfter.Milliseconds()}
	}
	fi, fo := limitsToWire(s.FilesIn), limitsToWire(s.FilesOut)
	w.FilesIn, w.FilesOut = &fi, &fo
	for _, r := range s.EgressAllow {
		wr := APIEgressRule{Host: r.Host, Methods: slices.Clone(r.Methods), Paths: slices.Clone(r.Paths), Shadow: r.Shadow, Authority: r.Authority}
		for _, c := range r.Credentials {
			wr.Credentials = append(wr.Credentials, APIEgressCredential{Header: c.Header, Env: c.Env, Secret: string(c.Secret),
				Methods: slices.Clone(c.Methods), Paths: slices.Clone(c.Paths)})
		}
		w.EgressAllow = append(w.EgressAllow, wr)
	}
	for _, c := range s.Requires.Sorted() {
		w.Requires = append(w.Requires, string(c))
	}
	if s.MinIsolation != nil {
		v := string(*s.MinIsolation)
		w.MinIsolation = &v
	}
	if s.RequiresOSFamily != nil {
		v := string(*s.RequiresOSFamily)
		w.RequiresOSFamily = &v
	}
	if s.MinCleanup != nil {
		v := string(*s.MinCleanup)
		w.MinCleanup = &v
	}
	if !s.Resources.IsZero() {
		w.Resources = resourcesToWire(s.Resources)
	}
	if h := s.HostTools; h != nil {
		wh := &APIHostTools{
			OutboundCaps:     slices.Clone(h.OutboundCaps),
			RequiresApproval: h.RequiresApproval,
			HasUndeclared:    h.HasUndeclared,
			ResponseLimits:   limitsToWire(h.ResponseLimits),
			MaxCallsPerRun:   h.MaxCallsPerRun,
		}
		if h.ResultIntegrity != nil {
			v := string(*h.ResultIntegrity)
			wh.ResultIntegrity = &v
		}
		for _, id := range h.Identities {
			wh.Identities = append(wh.Identities, string(id))
		}
		w.HostTools = wh
	}
	return w
}

// OutputsFromWire converts declared outputs; an omitted required is true and an omitted
// disposition land.
func OutputsFromWire(ws []APIDeclaredOutput) []sandbox.DeclaredOutput {
	if ws == nil {
		return nil
	}
	out := make([]sandbox.DeclaredOutput, len(ws))
	for i, w := range ws {
		o := sandbox.Output(w.Path)
		if w.Disposition != "" {
			o.Disposition = sandbox.OutputDisposition(w.Disposition)
		}
		o.MediaType = w.MediaType
		if w.Required != nil {
			o.Required = *w.Required
		}
		o.Name = cloneString(w.Name)
		out[i] = o
	}
	return out
}

// OutputsToWire converts declared outputs for the wire.
func OutputsToWire(os []sandbox.DeclaredOutput) []APIDeclaredOutput {
	if os == nil {
		return nil
	}
	out := make([]APIDeclaredOutput, len(os))
	for i, o := range os {
		req := o.Required
		out[i] = APIDeclaredOutput{Path: o.Path, Disposition: string(o.Disposition), MediaType: o.MediaType,
			Required: &req, Name: cloneString(o.Name)}
	}
	return out
}

// LimitsFromWire reads transfer limits from their wire form.
func LimitsFromWire(w APITransferLimits) sandbox.TransferLimits {
	return sandbox.TransferLimits{MaxBytesPerFile: w.MaxBytesPerFile, MaxTotalBytes: w.MaxTotalBytes, MaxFiles: w.MaxFiles}
}

func limitsToWire(l sandbox.TransferLimits) APITransferLimits {
	return APITransferLimits{MaxBytesPerFile: l.MaxBytesPerFile, MaxTotalBytes: l.MaxTotalBytes, MaxFiles: l.MaxFiles}
}

// KeyFromWire converts a wire key; nil gives the zero key.
func KeyFromWire(w *APIKey) sandbox.Key {
	if w == nil {
		return sandbox.Key{}
	}
	return sandbox.Key{Scope: w.Scope, ThreadID: w.ThreadID, AgentID: w.AgentID, CallID: w.CallID}
}

// KeyToWire converts a key for the wire.
func KeyToWire(k sandbox.Key) *APIKey {
	return &APIKey{Scope: k.Scope, ThreadID: k.ThreadID, AgentID: k.AgentID, CallID: k.CallID}
}

// StatToWire converts a file stat; nil stays nil.
func StatToWire(st *sandbox.FileStat) *APIFileStat {
	if st == nil {
		return nil
	}
	w := &APIFileStat{Path: st.Path, Kind: string(st.Kind)}
	if st.Size != nil {
		n := *st.Size
		w.Size = &n
	}
	return w
}

// StatFromWire converts a wire stat; nil stays nil. An unknown kind is refused.
func StatFromWire(w *APIFileStat) (*sandbox.FileStat, error) {
	if w == nil {
		return nil, nil
	}
	kind, err := sandbox.ParseEntryKind(w.Kind)
	if err != nil {
		return nil, err
	}
	st := &sandbox.FileStat{Path: w.Path, Kind: kind}
	if w.Size != nil {
		n := *w.Size
		st.Size = &n
	}
	return st, nil
}

// FailureToWire converts a disposal failure; nil stays nil.
func FailureToWire(f *sandbox.DisposalFailure) *APIDisposalFailure {
	if f == nil {
		return nil
	}
	return &APIDisposalFailure{Code: string(f.Code), Detail: f.Detail}
}

// FailureFromWire converts a wire disposal failure; nil stays nil. An unknown code is
// kept as it came (FoldDisposalFailures counts it as unknown).
func FailureFromWire(w *APIDisposalFailure) *sandbox.DisposalFailure {
	if w == nil {
		return nil
	}
	return &sandbox.DisposalFailure{Code: sandbox.DisposalCode(w.Code), Detail: w.Detail}
}

// DeclarationsToWire converts a backend's declarations, keeping a nil set or limits (the
// defaults) apart from an empty one.
func DeclarationsToWire(d sandbox.Declarations) APIDeclarations {
	w := APIDeclarations{
		EgressModes:                []string{},
		OSFamilies:                 []string{},
		IsolationScopes:            []string{},
		ObservesEgress:             d.ObservesEgress,
		EgressMethodTokens:         slices.Clone(d.EgressMethodTokens),
		EgressPaths:                d.EgressPaths,
		RequiresExclusiveAdmission: d.RequiresExclusiveAdmission,
	}
	if d.Capabilities != nil {
		w.Capabilities = []string{}
		for _, c := range d.Capabilities.Sorted() {
			w.Capabilities = append(w.Capabilities, string(c))
		}
	}
	if d.Limits != nil {
		w.Limits = &APISandboxLimits{FilesIn: limitsToWire(d.Limits.FilesIn), FilesOut: limitsToWire(d.Limits.FilesOut)}
	}
	if d.Resources != nil {
		w.Resources = resourcesToWire(*d.Resources)
	}
	for _, m := range d.EgressModes.Sorted() {
		w.EgressModes = append(w.EgressModes, string(m))
	}
	for _, f := range d.OSFamilies {
		w.OSFamilies = append(w.OSFamilies, string(f))
	}
	for _, s := range d.IsolationScopes {
		w.IsolationScopes = append(w.IsolationScopes, string(s))
	}
	if a := d.AttachedIdentity; a != nil {
		w.AttachedIdentity = &APIAttachedIdentity{Scope: string(a.Scope), RetentionSeconds: a.RetentionSeconds, Channels: slices.Clone(a.Channels)}
	}
	return w
}

// DeclarationsFromWire converts wire declarations back.
func DeclarationsFromWire(w APIDeclarations) sandbox.Declarations {
	d := sandbox.Declarations{
		EgressModes:                sandbox.NewEgressSet(),
		ObservesEgress:             w.ObservesEgress,
		EgressMethodTokens:         slices.Clone(w.EgressMethodTokens),
		EgressPaths:                w.EgressPaths,
		RequiresExclusiveAdmission: w.RequiresExclusiveAdmission,
	}
	if w.Capabilities != nil {
		d.Capabilities = sandbox.NewCapabilitySet()
		for _, c := range w.Capabilities {
			d.Capabilities[sandbox.Capability(c)] = struct{}{}
		}
	}
	if w.Limits != nil {
		d.Limits = &sandbox.SandboxLimits{FilesIn: LimitsFromWire(w.Limits.FilesIn), FilesOut: LimitsFromWire(w.Limits.FilesOut)}
	}
	if w.Resources != nil {
		r := ResourcesFromWire(*w.Resources)
		d.Resources = &r
	}
	for _, m := range w.EgressModes {
		d.EgressModes[sandbox.Egress(m)] = struct{}{}
	}
	for _, f := range w.OSFamilies {
		d.OSFamilies = append(d.OSFamilies, sandbox.OSFamily(f))
	}
	for _, s := range w.IsolationScopes {
		d.IsolationScopes = append(d.IsolationScopes, sandbox.IsolationScope(s))
	}
	if a := w.AttachedIdentity; a != nil {
		d.AttachedIdentity = &sandbox.AttachedIdentityDeclaration{Scope: sandbox.IsolationScope(a.Scope),
			RetentionSeconds: a.RetentionSeconds, Channels: slices.Clone(a.Channels)}
	}
	return d
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// ReapToWire converts a sweep's result.
func ReapToWire(r sandbox.ReapResult) APIReapResult {
	w := APIReapResult{OlderThanMS: r.OlderThan.Milliseconds(), Cutoff: r.Cutoff.UTC(), StartedAt: r.StartedAt.UTC(),
		FinishedAt: r.FinishedAt.UTC(), DryRun: r.DryRun, Disposed: r.Disposed, ProxiesRemoved: r.ProxiesRemoved,
		NetworksRemoved: r.NetworksRemoved, ObserversRemoved: r.ObserversRemoved, Failures: make([]APIReapFailure, 0, len(r.Failures))}
	if r.Scope != "" {
		scope := r.Scope
		w.Scope = &scope
	}
	for _, f := range r.Failures {
		w.Failures = append(w.Failures, APIReapFailure{Code: string(f.Code), Detail: f.Detail, ResourceID: f.ResourceID, ResourceKind: f.ResourceKind})
	}
	for _, d := range r.Resources {
		w.Resources = append(w.Resources, APIReapResource{Group: d.Group, Kind: d.Kind, Name: d.Name, ID: d.ID, Created: d.Created.UTC(),
			Anchor: d.Anchor, Expired: d.Expired, Action: string(d.Action)})
	}
	return w
}

// ReapFromWire converts a wire sweep's result; an unknown code or action is kept as it came.
func ReapFromWire(w APIReapResult) sandbox.ReapResult {
	r := sandbox.ReapResult{OlderThan: time.Duration(w.OlderThanMS) * time.Millisecond, Cutoff: w.Cutoff, StartedAt: w.StartedAt,
		FinishedAt: w.FinishedAt, DryRun: w.DryRun, Disposed: w.Disposed, ProxiesRemoved: w.ProxiesRemoved,
		NetworksRemoved: w.NetworksRemoved, ObserversRemoved: w.ObserversRemoved}
	if w.Scope != nil {
		r.Scope = *w.Scope
	}
	for _, f := range w.Failures {
		r.Failures = append(r.Failures, sandbox.ReapFailure{Code: sandbox.DisposalCode(f.Code), Detail: f.Detail, ResourceID: f.ResourceID, ResourceKind: f.ResourceKind})
	}
	for _, d := range w.Resources {
		r.Resources = append(r.Resources, sandbox.ReapDecision{Group: d.Group, Kind: d.Kind, Name: d.Name, ID: d.ID, Created: d.Created,
			Anchor: d.Anchor, Expired: d.Expired, Action: sandbox.ReapAction(d.Action)})
	}
	return r
}
