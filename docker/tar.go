package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Bounds of the archive reader: one header block, at most this many header blocks before the
// real entry, and at most this many bytes of extended metadata (PAX and GNU long names) in all.
const (
	tarBlockSize        = 512
	maxTarHeaderBlocks  = 32
	maxTarMetadataBytes = 64 << 10
)

// EntryType is the kind of an archive entry, as the engine's tar header describes it.
type EntryType int

// Entry kinds. Anything that is not a regular file, directory or symbolic link (hard link, fifo,
// device, socket, contiguous file) is EntryOther.
const (
	EntryOther EntryType = iota
	EntryFile
	EntryDir
	EntrySymlink
)

func (t EntryType) String() string {
	switch t {
	case EntryFile:
		return "file"
	case EntryDir:
		return "directory"
	case EntrySymlink:
		return "symlink"
	}
	return "other"
}

// Entry is the header of the first entry of an archive the engine returned: no-follow, answered
// by the engine, never by the guest.
type Entry struct {
	Name       string // the entry's name in the archive (the base name of the copied path)
	Type       EntryType
	Typeflag   byte
	Size       int64 // body size; set only for EntryFile
	Mode       int64 // permission and mode bits from the header
	UID, GID   int
	LinkTarget string // EntrySymlink: where the link points
}

// readHeader reads the first entry header of a tar stream from r, applying any PAX or GNU
// long-name headers that precede it. It reads at most 32 header blocks and 64 KiB of extended
// metadata and never reads past the real entry's header block. It fails closed: sparse entries,
// malformed PAX records, bad checksums or negative sizes are [errTarMetadata]; a stream that
// ends (or holds only the end-of-archive marker) before any header is [errNoTarHeader].
func readHeader(r io.Reader) (*Entry, error) {
	var (
		block    [tarBlockSize]byte
		metaUsed int64
		longName string
		longLink string
		pax      = map[string]string{}
		global   = map[string]string{}
		extended bool // an extended header was read: a short read now is incomplete metadata
	)
	for i := 0; i < maxTarHeaderBlocks; i++ {
		if _, err := io.ReadFull(r, block[:]); err != nil {
			if extended {
				return nil, fmt.Errorf("%w: incomplete tar metadata", errTarMetadata)
			}
			return nil, errNoTarHeader
		}
		if isZeroBlock(block[:]) {
			if extended {
				return nil, fmt.Errorf("%w: archive ended after extended headers", errTarMetadata)
			}
			return nil, errNoTarHeader
		}
		if !validChecksum(block[:]) {
			return nil, fmt.Errorf("%w: header checksum mismatch", errTarMetadata)
		}
		size, err := parseNumeric(block[124:136])
		if err != nil {
			return nil, err
		}
		if size < 0 {
			return nil, fmt.Errorf("%w: negative entry size", errTarMetadata)
		}
		flag := block[156]
		switch flag {
		case tar.TypeXHeader, tar.TypeXGlobalHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
			extended = true
			metaUsed += size
			if metaUsed > maxTarMetadataBytes {
				return nil, fmt.Errorf("%w: extended metadata exceeds %d bytes", errTarMetadata, maxTarMetadataBytes)
			}
			data := make([]byte, roundBlock(size))
			if _, err := io.ReadFull(r, data); err != nil {
				return nil, fmt.Errorf("%w: incomplete tar metadata", errTarMetadata)
			}
			data = data[:size]
			switch flag {
			case tar.TypeXHeader:
				if err := parsePAX(data, pax); err != nil {
					return nil, err
				}
			case tar.TypeXGlobalHeader:
				if err := parsePAX(data, global); err != nil {
					return nil, err
				}
			case tar.TypeGNULongName:
				longName = cString(data)
			case tar.TypeGNULongLink:
				longLink = cString(data)
			}
			continue
		case tar.TypeGNUSparse:
			return nil, fmt.Errorf("%w: GNU sparse entry", errTarMetadata)
		}
		return buildEntry(block[:], size, merge(global, pax), longName, longLink)
	}
	return nil, fmt.Errorf("%w: more than %d header blocks", errTarMetadata, maxTarHeaderBlocks)
}

// readEntry reads the first entry of a tar stream from r: its header, and for a regular file its
// body. A file whose header size is above maxBytes is refused with a [*CapExceededError] before
// any body byte is read (the entry is returned alongside). A body that ends early is a
// [*shortBodyError]. For other entry kinds the body is nil. readEntry never reads past the body,
// so the caller can stop the producer without draining it.
func readEntry(r io.Reader, maxBytes int64) (*Entry, []byte, error) {
	e, err := readHeader(r)
	if err != nil {
		return nil, nil, err
	}
	if e.Type != EntryFile {
		return e, nil, nil
	}
	if e.Size > maxBytes {
		return e, nil, &CapExceededError{Path: e.Name, Size: e.Size, Cap: maxBytes}
	}
	body := make([]byte, e.Size)
	n, err := io.ReadFull(r, body)
	if err != nil {
		return e, nil, &shortBodyError{Path: e.Name, Expected: e.Size, Received: int64(n)}
	}
	return e, body, nil
}

func buildEntry(h []byte, size int64, pax map[string]string, longName, longLink string) (*Entry, error) {
	e := &Entry{Typeflag: h[156], Name: cString(h[0:100]), LinkTarget: cString(h[157:257])}
	if string(h[257:263]) == "ustar\x00" { // POSIX ustar: a name prefix
		if prefix := cString(h[345:500]); prefix != "" {
			e.Name = prefix + "/" + e.Name
		}
	}
	var err error
	if e.Mode, err = parseNumeric(h[100:108]); err != nil {
		return nil, err
	}
	uid, err := parseNumeric(h[108:116])
	if err != nil {
		return nil, err
	}
	gid, err := parseNumeric(h[116:124])
	if err != nil {
		return nil, err
	}
	e.UID, e.GID = int(uid), int(gid)
	if longName != "" {
		e.Name = longName
	}
	if longLink != "" {
		e.LinkTarget = longLink
	}
	if size, err = applyPAX(e, pax, size); err != nil {
		return nil, err
	}
	setType(e, size)
	return e, nil
}

// applyPAX lets the PAX records override the header's name, link target, size and owner; it
// returns the size.
func applyPAX(e *Entry, pax map[string]string, size int64) (int64, error) {
	for k, v := range pax {
		switch k {
		case "path":
			e.Name = v
		case "linkpath":
			e.LinkTarget = v
		case "size", "uid", "gid":
			n, err := paxNumber(k, v)
			if err != nil {
				return 0, err
			}
			switch k {
			case "size":
				size = n
			case "uid":
				e.UID = int(n)
			case "gid":
				e.GID = int(n)
			}
		}
	}
	return size, nil
}

// setType sets the entry's kind from its type flag, and its size for a regular file.
func setType(e *Entry, size int64) {
	switch e.Typeflag {
	case tar.TypeReg:
		e.Type, e.Size = EntryFile, size
	case 0: // the pre-POSIX regular-file flag, NUL
		if strings.HasSuffix(e.Name, "/") {
			e.Type = EntryDir
		} else {
			e.Type, e.Size = EntryFile, size
		}
	case tar.TypeDir:
		e.Type = EntryDir
	case tar.TypeSymlink:
		e.Type = EntrySymlink
	default:
		e.Type = EntryOther
	}
}

// parsePAX parses PAX records ("<len> <key>=<value>\n") into into, refusing anything malformed
// and every GNU sparse record.
func parsePAX(data []byte, into map[string]string) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 {
			return fmt.Errorf("%w: PAX record without a length", errTarMetadata)
		}
		if !allDigits(data[:sp]) {
			return fmt.Errorf("%w: PAX record length is not decimal", errTarMetadata)
		}
		n, err := strconv.Atoi(string(data[:sp]))
		if err != nil || n <= sp+1 || n > len(data) {
			return fmt.Errorf("%w: PAX record length beyond its data", errTarMetadata)
		}
		rec := data[sp+1 : n]
		data = data[n:]
		if len(rec) == 0 || rec[len(rec)-1] != '\n' {
			return fmt.Errorf("%w: PAX record does not end in a newline", errTarMetadata)
		}
		rec = rec[:len(rec)-1]
		eq := bytes.IndexByte(rec, '=')
		if eq <= 0 {
			return fmt.Errorf("%w: PAX record without '='", errTarMetadata)
		}
		key := string(rec[:eq])
		if strings.HasPrefix(key, "GNU.sparse.") {
			return fmt.Errorf("%w: GNU sparse PAX record", errTarMetadata)
		}
		into[key] = string(rec[eq+1:])
	}
	return nil
}

func paxNumber(key, v string) (int64, error) {
	if v == "" || !allDigits([]byte(v)) {
		return 0, fmt.Errorf("%w: PAX %s is not all digits", errTarMetadata, key)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: PAX %s out of range", errTarMetadata, key)
	}
	return n, nil
}

// parseNumeric decodes a header number: octal text, or GNU base-256 when the high bit is set.
func parseNumeric(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		if len(b) > 9 && b[0] == 0x80 && isZeroBlock(b[1:len(b)-8]) {
			b = b[len(b)-8:]
			var n uint64
			for _, c := range b {
				n = n<<8 | uint64(c)
			}
			if n > 1<<63-1 {
				return 0, fmt.Errorf("%w: header number out of range", errTarMetadata)
			}
			return int64(n), nil
		}
		if b[0] == 0xff {
			return -1, nil // negative base-256: refused by the caller where it matters
		}
		return 0, fmt.Errorf("%w: header number out of range", errTarMetadata)
	}
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 8, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: header number %q is not octal", errTarMetadata, s)
	}
	return n, nil
}

func validChecksum(h []byte) bool {
	stored, err := parseNumeric(h[148:156])
	if err != nil {
		return false
	}
	var unsigned, signed int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return stored == unsigned || stored == signed
}

func merge(global, local map[string]string) map[string]string {
	if len(global) == 0 {
		return local
	}
	out := make(map[string]string, len(global)+len(local))
	for k, v := range global {
		out[k] = v
	}
	for k, v := range local {
		out[k] = v
	}
	return out
}

func roundBlock(n int64) int64 { return (n + tarBlockSize - 1) / tarBlockSize * tarBlockSize }

func isZeroBlock(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
