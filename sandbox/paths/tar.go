package paths

import (
	"archive/tar"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// BlockSize is the size of one tar header block.
const BlockSize = 512

// typeRegA is the pre-POSIX spelling of a regular file ('\x00'); archive/tar deprecates its
// constant, but engines still write it.
const typeRegA = '\x00'

// FileStatFromTarHeader describes the entry of tar header h under the relative path rel
// (protocol §6.6): a regular file is [sandbox.EntryFile] with its size, a directory
// [sandbox.EntryDirectory], a symbolic link [sandbox.EntrySymlink], and everything else (a
// hard link, fifo, character or block device, contiguous file, GNU or PAX extended header,
// unknown type) [sandbox.EntryOther]. Only a file carries a size, and a negative size is
// dropped, so it fails closed. A nil header yields nil.
func FileStatFromTarHeader(h *tar.Header, rel string) *sandbox.FileStat {
	if h == nil {
		return nil
	}
	switch h.Typeflag {
	case tar.TypeReg, typeRegA:
		if h.Typeflag == typeRegA && strings.HasSuffix(h.Name, "/") {
			return sandbox.NewFileStat(rel, sandbox.EntryDirectory, 0)
		}
		if h.Size < 0 {
			return &sandbox.FileStat{Path: rel, Kind: sandbox.EntryFile}
		}
		return sandbox.NewFileStat(rel, sandbox.EntryFile, h.Size)
	case tar.TypeDir:
		return sandbox.NewFileStat(rel, sandbox.EntryDirectory, 0)
	case tar.TypeSymlink:
		return sandbox.NewFileStat(rel, sandbox.EntrySymlink, 0)
	default:
		return sandbox.NewFileStat(rel, sandbox.EntryOther, 0)
	}
}

// TarHeaderFromBlock decodes one 512-byte tar header block as it stands: extended headers
// (PAX 'x' and 'g', GNU 'L' and 'K') are returned as themselves, not applied, so a caller
// that must follow them reads the blocks after. V7, USTAR (with its name prefix) and GNU
// layouts are read; numeric fields may be octal or base-256. Names are kept byte for byte,
// invalid UTF-8 included.
//
// It fails with an error wrapping [ErrTarHeader] for a block that is not 512 bytes, an
// all-zero (end-of-archive) block, a checksum mismatch, a malformed numeric field and a
// negative size.
func TarHeaderFromBlock(block []byte) (*tar.Header, error) {
	if len(block) != BlockSize {
		return nil, fmt.Errorf("%w: block is %d bytes, not %d", ErrTarHeader, len(block), BlockSize)
	}
	if bytes.Count(block, []byte{0}) == BlockSize {
		return nil, fmt.Errorf("%w: zero block (end of archive)", ErrTarHeader)
	}
	if err := verifyChecksum(block); err != nil {
		return nil, err
	}
	var f fields
	h := &tar.Header{
		Typeflag: block[156],
		Name:     cString(block[0:100]),
		Linkname: cString(block[157:257]),
		Mode:     f.number("mode", block[100:108]),
		Uid:      int(f.number("uid", block[108:116])),
		Gid:      int(f.number("gid", block[116:124])),
		Size:     f.number("size", block[124:136]),
		ModTime:  time.Unix(f.number("mtime", block[136:148]), 0),
	}
	switch magic := string(block[257:265]); {
	case magic == "ustar\x0000":
		h.Format = tar.FormatUSTAR
		if prefix := cString(block[345:500]); prefix != "" {
			h.Name = prefix + "/" + h.Name
		}
	case magic == "ustar  \x00":
		h.Format = tar.FormatGNU
	}
	if h.Format != tar.FormatUnknown {
		h.Uname = cString(block[265:297])
		h.Gname = cString(block[297:329])
		h.Devmajor = f.number("devmajor", block[329:337])
		h.Devminor = f.number("devminor", block[337:345])
	}
	if f.err != nil {
		return nil, f.err
	}
	if h.Size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrTarHeader, h.Size)
	}
	if h.Typeflag == typeRegA {
		h.Typeflag = tar.TypeReg
		if strings.HasSuffix(h.Name, "/") {
			h.Typeflag = tar.TypeDir
		}
	}
	return h, nil
}

// verifyChecksum checks the header checksum, accepting the unsigned sum the standard
// requires and the signed sum some historic writers used.
func verifyChecksum(block []byte) error {
	var f fields
	want := f.number("checksum", block[148:156])
	if f.err != nil {
		return f.err
	}
	var unsigned, signed int64
	for i, c := range block {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	if want != unsigned && want != signed {
		return fmt.Errorf("%w: checksum %d does not match the block (%d)", ErrTarHeader, want, unsigned)
	}
	return nil
}

// cString is a NUL-terminated field, bytes preserved.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// fields decodes numeric header fields, keeping the first error.
type fields struct{ err error }

// number decodes an octal or base-256 field; a field of only NULs and spaces is zero.
func (f *fields) number(name string, b []byte) int64 {
	if f.err != nil {
		return 0
	}
	if len(b) > 0 && b[0]&0x80 != 0 {
		return f.base256(name, b)
	}
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 8, 64)
	if err != nil {
		f.err = fmt.Errorf("%w: %s field %q is not octal", ErrTarHeader, name, s)
		return 0
	}
	return v
}

// base256 decodes GNU's binary encoding: the high bit of the first byte marks it, and the
// rest is a big-endian two's-complement number.
func (f *fields) base256(name string, b []byte) int64 {
	var inv byte
	if b[0]&0x40 != 0 {
		inv = 0xff
	}
	var x uint64
	for i, c := range b {
		c ^= inv
		if i == 0 {
			c &= 0x7f
		}
		if x>>56 != 0 {
			f.err = fmt.Errorf("%w: %s field overflows", ErrTarHeader, name)
			return 0
		}
		x = x<<8 | uint64(c)
	}
	if x>>63 != 0 {
		f.err = fmt.Errorf("%w: %s field overflows", ErrTarHeader, name)
		return 0
	}
	if inv == 0xff {
		return ^int64(x)
	}
	return int64(x)
}
