package sandbox

import "context"

// Artifact is one collected output on its way to the host: the bytes of a landing output,
// delivered under its landing name.
type Artifact struct {
	Name      string // the delivered name; it passes [ValidateArtifactName]
	Content   []byte // the bytes read, undecoded
	Kind      string // the workload kind that produced it
	MediaType string // declared by the kind, never sniffed; "" = none
}

// LandedArtifact is what a sink reports for a delivered artifact.
type LandedArtifact struct {
	Name    string
	Display string  // the only part that reaches the model
	Handle  *string // sink-specific locator (a host path for [FileSystemSink]); nil = none
}

// OutputSink receives landing outputs. Deliver refuses an artifact by returning an error; an
// error stops the collection, and artifacts delivered before it stand.
type OutputSink struct {
	Deliver func(ctx context.Context, a Artifact) (LandedArtifact, error)
	// Normalization is applied to delivered names by [CollectOutputs]; "" means
	// [NormalizeNFC].
	Normalization NameNormalization
}
