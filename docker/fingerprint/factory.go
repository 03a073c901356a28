package fingerprint

import (
	"context"
	"slices"

	"github.com/mafsandbox/engine/sandbox"
)

// Factory builds a [Subject] per sandbox on one engine with the same options: what the NATS
// service's fingerprint call uses (service.WithFingerprinter).
type Factory struct {
	eng  Engine
	opts []Option
}

// NewFactory returns a factory of subjects on eng with opts. It fails with
// [*sandbox.InvalidArgumentError] for a nil engine, a bad option or no observer image, so a
// misconfigured server fails at its start rather than at the first fingerprint.
func NewFactory(eng Engine, opts ...Option) (*Factory, error) {
	if eng == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "fingerprint: the factory needs an engine"}
	}
	if _, err := parseOptions(opts); err != nil {
		return nil, err
	}
	return &Factory{eng: eng, opts: slices.Clone(opts)}, nil
}

// NewSubject builds the subject of sb, addressed by its instance ID (the engine's container
// ID), on sb's storage base when sb has a WorkDir() string method (actors.Sandbox), with the
// observer image resolved now. It fails as [New].
func (f *Factory) NewSubject(ctx context.Context, sb sandbox.Sandbox) (sandbox.FingerprintSubject, error) {
	if sb == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "fingerprint: no sandbox"}
	}
	c := byID{id: sb.InstanceID()}
	if wd, ok := sb.(interface{ WorkDir() string }); ok {
		c.workDir = wd.WorkDir()
	}
	return New(ctx, f.eng, c, f.opts...)
}

// byID is a container addressed by its ID alone, on its storage base.
type byID struct{ id, workDir string }

func (b byID) ContainerName() string { return b.id }
func (b byID) InstanceID() string    { return b.id }
func (b byID) WorkDir() string       { return b.workDir }
