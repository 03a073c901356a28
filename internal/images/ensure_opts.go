package images

// EnsureOpt changes how an Ensure function ([EnsureBusybox], [EnsurePython]) goes about its
// build.
type EnsureOpt func(*ensureOptions)

type ensureOptions struct {
	building func() // called once, just before a build; never when the image is current
}

// WithBuildNotice calls f just before the image is built, and not at all when the daemon
// already has a current one: a caller says "building" only when it is.
func WithBuildNotice(f func()) EnsureOpt { return func(o *ensureOptions) { o.building = f } }

// ensureOpts applies opts (nil ones skipped).
func ensureOpts(opts []EnsureOpt) ensureOptions {
	var o ensureOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// notice calls the build notice, if any.
func (o ensureOptions) notice() {
	if o.building != nil {
		o.building()
	}
}
