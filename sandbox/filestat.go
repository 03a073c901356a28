package sandbox

// FileStat describes one guest entry without following it.
type FileStat struct {
	Path string    // relative to the working directory the call used; "" is the directory itself
	Kind EntryKind //
	Size *int64    // nil = unknown; always nil for a link, a directory and "other"
}

// NewFileStat builds a stat, keeping the size only for a regular file: a link's size would be
// its target's length, and a nil size fails closed.
func NewFileStat(path string, kind EntryKind, size int64) *FileStat {
	st := &FileStat{Path: path, Kind: kind}
	if kind == EntryFile {
		st.Size = &size
	}
	return st
}
