package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// storageBase is the working directory outputs are collected from: "." names the base the
// backend bound for the sandbox.
const storageBase = "."

// Cap names carried by [TransferCapExceededError] from collection.
const (
	capPerFile   = "per-file cap"
	capFileCount = "file count cap"
	capTotal     = "total cap"
	capMaxBytes  = "max bytes"
)

// CollectOutputs collects the outputs spec declares, plus callTimeOutputs, from sb: it stats
// every output, checks the spec's FilesOut caps, reads the landing ones and delivers them to
// sink in declaration order. Outputs of disposition consume are statted and count against
// every cap but are neither read nor delivered.
//
// The phases run in this order, and the order is part of the contract:
//
//  1. call-time outputs while the spec does not name outputs at call time: an
//     [*InvalidArgumentError];
//  2. landing outputs and no sink: [*OutputSinkRequiredError];
//  3. names, before the sandbox is touched: every path, and every landing output's delivered
//     name (its Name or Path, NFC-normalised unless the sink's Normalization is
//     [NormalizeNone]), must pass [ValidateArtifactName]; two landing outputs whose names are
//     equal once NFC-normalised, lower-cased and POSIX-normalised fail with
//     [*ArtifactNameCollisionError] (lower-casing is not case folding: "ß" and "ss" differ);
//  4. stat, in declaration order, relative to the storage base ("."): an absent output fails
//     with [*OutputMissingError] if required and is skipped otherwise; an entry that is not a
//     regular file fails with [*OutputNotRegularError], an unknown size with
//     [*OutputSizeUnknownError]; each size is tallied against the per-file cap, then the file
//     count, then the total ([*TransferCapExceededError]);
//  5. nothing to land: an empty result, and the sink is not called;
//  6. read each landing output, asking for no more than its stat size and the total left, and
//     tally the bytes actually read again;
//  7. deliver, in declaration order.
//
// Backend errors from stat and read are translated: a confinement refusal ([ErrInvalid])
// becomes [*OutputNotConfinedError], an OS-level failure ([ErrOS], not found, permission,
// timeouts) [*OutputUnreachableError], both keeping the original as the cause; a
// [*TransferCapExceededError] passes through unchanged; anything else, a cancelled ctx
// among them, is returned wrapped.
//
// A Deliver error stops the collection. It is returned, wrapped, together with the artifacts
// landed before it: those deliveries stand, and this is the only way a partial landing occurs.
// Every other error comes before any delivery and returns no artifacts.
func CollectOutputs(ctx context.Context, sb Sandbox, spec Spec, sink *OutputSink, callTimeOutputs []DeclaredOutput) ([]LandedArtifact, error) {
	if !spec.Valid() {
		return nil, &InvalidArgumentError{Reason: "collect outputs: the spec was not built by NewSpec"}
	}
	if len(callTimeOutputs) > 0 && !spec.OutputsNamedAtCallTime {
		return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
			"the %q workload does not name outputs at call time, yet %d call-time outputs were given",
			spec.Kind, len(callTimeOutputs))}
	}

	all, err := plannedOutputs(spec.DeclaredOutputs, callTimeOutputs)
	if err != nil {
		return nil, err
	}
	if err := requireSink(all, sink); err != nil {
		return nil, err
	}
	if err := checkNames(all, sink); err != nil {
		return nil, err
	}
	if len(all) > 0 && sb == nil {
		return nil, &InvalidArgumentError{Reason: "collect outputs: the sandbox is nil"}
	}

	toRead, err := statOutputs(ctx, sb, spec, all)
	if err != nil {
		return nil, err
	}
	if len(toRead) == 0 {
		return []LandedArtifact{}, nil
	}
	contents, err := readOutputs(ctx, sb, spec.FilesOut, toRead)
	if err != nil {
		return nil, err
	}

	landed := make([]LandedArtifact, 0, len(toRead))
	for i, o := range toRead {
		if err := ctx.Err(); err != nil {
			return landed, fmt.Errorf("deliver output %q: %w", o.name, err)
		}
		a := Artifact{Name: o.name, Content: contents[i], Kind: spec.Kind, MediaType: o.MediaType}
		la, err := sink.Deliver(ctx, a)
		if err != nil {
			return landed, fmt.Errorf("deliver output %q: %w", o.name, err)
		}
		landed = append(landed, la)
	}
	return landed, nil
}

// plannedOutput is one output to collect, with its disposition resolved.
type plannedOutput struct {
	DeclaredOutput
	land     bool
	callTime bool
	name     string // the delivered name, set for landing outputs by checkNames
	size     int64  // the stat size, set by statOutputs
}

// plannedOutputs is declared ++ callTime, each output's disposition parsed strictly ("" is
// the default, land).
func plannedOutputs(declared, callTime []DeclaredOutput) ([]plannedOutput, error) {
	all := make([]plannedOutput, 0, len(declared)+len(callTime))
	for i, o := range slices.Concat(declared, callTime) {
		d := o.Disposition
		if d == "" {
			d = DispositionLand
		}
		d, err := ParseOutputDisposition(string(d))
		if err != nil {
			return nil, err
		}
		all = append(all, plannedOutput{DeclaredOutput: o, land: d == DispositionLand, callTime: i >= len(declared)})
	}
	return all, nil
}

// requireSink refuses landing outputs without a sink able to take them.
func requireSink(all []plannedOutput, sink *OutputSink) error {
	var paths []string
	atCallTime := false
	for _, o := range all {
		if o.land {
			paths = append(paths, o.Path)
			atCallTime = atCallTime || o.callTime
		}
	}
	if len(paths) == 0 {
		return nil
	}
	if sink == nil {
		return &OutputSinkRequiredError{Paths: paths, AtCallTime: atCallTime}
	}
	if sink.Deliver == nil {
		return &InvalidArgumentError{Reason: "collect outputs: the output sink has no Deliver function"}
	}
	return nil
}

// checkNames validates every path, then each landing output's delivered name, and refuses two
// landing outputs that would land as one file. It sets each landing output's name.
func checkNames(all []plannedOutput, sink *OutputSink) error {
	for _, o := range all {
		if err := ValidateArtifactName(o.Path); err != nil {
			return err
		}
	}
	nfc := false
	if sink != nil {
		n, err := sink.normalization()
		if err != nil {
			return err
		}
		nfc = n == NormalizeNFC
	}
	seen := map[string]int{} // collision key -> index in all
	for i := range all {
		o := &all[i]
		if !o.land {
			continue
		}
		o.name = o.LandingName()
		if nfc {
			o.name = norm.NFC.String(o.name)
		}
		if o.name != o.Path {
			if err := ValidateArtifactName(o.name); err != nil {
				return err
			}
		}
		key := collisionKey(o.name)
		if j, ok := seen[key]; ok {
			return &ArtifactNameCollisionError{First: all[j].Path, Second: o.Path, Identical: all[j].name == o.name}
		}
		seen[key] = i
	}
	return nil
}

// normalization is the sink's effective normalization: "" is the default, nfc; an unknown
// value is an invalid argument.
func (s *OutputSink) normalization() (NameNormalization, error) {
	if s.Normalization == "" {
		return NormalizeNFC, nil
	}
	return ParseNameNormalization(string(s.Normalization))
}

// collisionKey is POSIX-normalise(lowercase(NFC(name))). Lower-casing, not case folding, so
// "ß" and "ss" stay distinct.
func collisionKey(name string) string {
	return path.Clean(strings.ToLower(norm.NFC.String(name)))
}

// statOutputs stats every output in order, tallies the sizes against the caps and returns the
// landing outputs that exist.
func statOutputs(ctx context.Context, sb Sandbox, spec Spec, all []plannedOutput) ([]plannedOutput, error) {
	t := tally{limits: spec.FilesOut}
	var toRead []plannedOutput
	for _, o := range all {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("stat output %q: %w", o.Path, err)
		}
		st, err := sb.StatFile(ctx, o.Path, storageBase)
		if err != nil {
			return nil, translateBackendError("stat", o.Path, err)
		}
		if st == nil {
			if o.Required {
				return nil, &OutputMissingError{Kind: spec.Kind, Path: o.Path}
			}
			continue
		}
		if st.Kind != EntryFile {
			return nil, &OutputNotRegularError{Path: o.Path, Kind: st.Kind}
		}
		if st.Size == nil || *st.Size < 0 {
			return nil, &OutputSizeUnknownError{Path: o.Path}
		}
		if err := t.add(o.Path, *st.Size); err != nil {
			return nil, err
		}
		if o.land {
			o.size = *st.Size
			toRead = append(toRead, o)
		}
	}
	return toRead, nil
}

// readOutputs reads each output with a fresh tally, never asking for more than its stat size
// or the total left.
func readOutputs(ctx context.Context, sb Sandbox, limits TransferLimits, toRead []plannedOutput) ([][]byte, error) {
	t := tally{limits: limits}
	contents := make([][]byte, len(toRead))
	for i, o := range toRead {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read output %q: %w", o.Path, err)
		}
		maxBytes := min(o.size, max(limits.MaxTotalBytes-t.total, 0))
		data, err := sb.ReadFile(ctx, o.Path, storageBase, maxBytes)
		if err != nil {
			return nil, translateBackendError("read", o.Path, err)
		}
		// A backend must refuse above maxBytes itself; one that did not is refused here.
		if n := int64(len(data)); n > maxBytes {
			return nil, &TransferCapExceededError{Path: o.Path, Cap: capMaxBytes, Limit: maxBytes, Actual: n}
		}
		if err := t.add(o.Path, int64(len(data))); err != nil {
			return nil, err
		}
		contents[i] = data
	}
	return contents, nil
}

// tally counts files and bytes against transfer caps.
type tally struct {
	limits TransferLimits
	count  int64
	total  int64
}

// add counts one file of size bytes: the per-file cap first, then the file count, then the
// running total.
func (t *tally) add(path string, size int64) error {
	if size > t.limits.MaxBytesPerFile {
		return &TransferCapExceededError{Path: path, Cap: capPerFile, Limit: t.limits.MaxBytesPerFile, Actual: size}
	}
	if t.count+1 > t.limits.MaxFiles {
		return &TransferCapExceededError{Path: path, Cap: capFileCount, Limit: t.limits.MaxFiles, Actual: t.count + 1}
	}
	if size > t.limits.MaxTotalBytes-t.total {
		return &TransferCapExceededError{Path: path, Cap: capTotal, Limit: t.limits.MaxTotalBytes, Actual: saturatingAdd(t.total, size)}
	}
	t.count++
	t.total += size
	return nil
}

func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// translateBackendError maps an error from StatFile or ReadFile into the output family.
func translateBackendError(op, path string, err error) error {
	var capErr *TransferCapExceededError
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &capErr):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s output %q: %w", op, path, err)
	case errors.Is(err, ErrInvalid):
		return &OutputNotConfinedError{Path: path, Err: err}
	case errors.Is(err, ErrOS), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, ErrIsDirectory), errors.Is(err, ErrTimeout), errors.As(err, &pathErr):
		return &OutputUnreachableError{Path: path, Err: err}
	default:
		return fmt.Errorf("%s output %q: %w", op, path, err)
	}
}
