package paths_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// firstBlock writes h with archive/tar and returns the first 512-byte block written.
func firstBlock(t *testing.T, h *tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(h); err != nil {
		t.Fatalf("write header: %v", err)
	}
	if buf.Len() < paths.BlockSize {
		t.Fatalf("the writer wrote %d bytes", buf.Len())
	}
	return buf.Bytes()[:paths.BlockSize]
}

// rawBlock builds a header block by hand: fields not covered by archive/tar's writer (V7
// layout, the '\x00' type, extended header types, odd numeric encodings).
type rawBlock struct {
	name     string
	typeflag byte
	size     []byte // the 12-byte size field; nil = octal 0
	magic    string // 8 bytes at 257; "" = V7
	signed   bool   // write the signed checksum
	checksum int64  // when non-zero, write this instead of the right one
}

func (r rawBlock) bytes() []byte {
	b := make([]byte, paths.BlockSize)
	copy(b[0:100], r.name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0001750\x00")
	copy(b[116:124], "0001750\x00")
	copy(b[124:136], "00000000000\x00")
	if r.size != nil {
		copy(b[124:136], r.size)
	}
	copy(b[136:148], "14712345670\x00")
	b[156] = r.typeflag
	copy(b[257:265], r.magic)
	copy(b[148:156], "        ")
	var unsigned, signed int64
	for _, c := range b {
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	sum := unsigned
	if r.signed {
		sum = signed
	}
	if r.checksum != 0 {
		sum = r.checksum
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func TestTarHeaderFromBlock(t *testing.T) {
	longName := strings.Repeat("d/", 60) + "file.txt"
	cases := []struct {
		name     string
		block    func(t *testing.T) []byte
		wantType byte
		wantName string
		wantSize int64
		wantUID  int
		wantErr  error
	}{
		{"ustar regular file", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: "work/a.txt", Typeflag: tar.TypeReg, Size: 42, Mode: 0o644, Uid: 1000, Format: tar.FormatUSTAR})
		}, tar.TypeReg, "work/a.txt", 42, 1000, nil},
		{"ustar long name uses the prefix", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: longName, Typeflag: tar.TypeReg, Size: 1, Format: tar.FormatUSTAR})
		}, tar.TypeReg, longName, 1, 0, nil},
		{"directory", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: "work/", Typeflag: tar.TypeDir, Mode: 0o755})
		}, tar.TypeDir, "work/", 0, 0, nil},
		{"symlink", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"})
		}, tar.TypeSymlink, "link", 0, 0, nil},
		{"gnu base-256 size", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 1 << 34, Format: tar.FormatGNU})
		}, tar.TypeReg, "big", 1 << 34, 0, nil},
		{"pax extended header is returned as itself", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: "naïve-" + longName, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		}, tar.TypeXHeader, "", -1, 0, nil},
		{"gnu long name is returned as itself", func(t *testing.T) []byte {
			return firstBlock(t, &tar.Header{Name: longName, Typeflag: tar.TypeReg, Format: tar.FormatGNU})
		}, tar.TypeGNULongName, "././@LongLink", -1, 0, nil},
		{"v7 old regular file", func(*testing.T) []byte { return rawBlock{name: "old.txt"}.bytes() },
			tar.TypeReg, "old.txt", 0, 1000, nil},
		{"v7 old directory by its slash", func(*testing.T) []byte { return rawBlock{name: "old/"}.bytes() },
			tar.TypeDir, "old/", 0, 1000, nil},
		{"invalid UTF-8 names are kept byte for byte", func(*testing.T) []byte {
			return rawBlock{name: "bad-\xff\xfe", typeflag: tar.TypeReg}.bytes()
		}, tar.TypeReg, "bad-\xff\xfe", 0, 1000, nil},
		{"signed checksum is accepted", func(*testing.T) []byte {
			return rawBlock{name: "\xff\xff\xff", typeflag: tar.TypeReg, signed: true}.bytes()
		}, tar.TypeReg, "\xff\xff\xff", 0, 1000, nil},
		{"space-padded octal", func(*testing.T) []byte {
			return rawBlock{name: "a", typeflag: tar.TypeReg, size: []byte("      12    ")}.bytes()
		}, tar.TypeReg, "a", 10, 1000, nil},

		{"short block", func(*testing.T) []byte { return make([]byte, 100) }, 0, "", 0, 0, paths.ErrTarHeader},
		{"zero block", func(*testing.T) []byte { return make([]byte, paths.BlockSize) }, 0, "", 0, 0, paths.ErrTarHeader},
		{"checksum mismatch", func(*testing.T) []byte { return rawBlock{name: "a", typeflag: tar.TypeReg, checksum: 7}.bytes() },
			0, "", 0, 0, paths.ErrTarHeader},
		{"checksum not octal", func(*testing.T) []byte {
			b := rawBlock{name: "a", typeflag: tar.TypeReg}.bytes()
			copy(b[148:156], "9999999\x00")
			return b
		}, 0, "", 0, 0, paths.ErrTarHeader},
		{"size not octal", func(*testing.T) []byte {
			return rawBlock{name: "a", typeflag: tar.TypeReg, size: []byte("0000000008x\x00")}.bytes()
		}, 0, "", 0, 0, paths.ErrTarHeader},
		{"negative base-256 size", func(*testing.T) []byte {
			return rawBlock{name: "a", typeflag: tar.TypeReg, size: bytes.Repeat([]byte{0xff}, 12)}.bytes()
		}, 0, "", 0, 0, paths.ErrTarHeader},
		{"base-256 size too wide", func(*testing.T) []byte {
			return rawBlock{name: "a", typeflag: tar.TypeReg, size: append([]byte{0x80}, bytes.Repeat([]byte{0x7f}, 11)...)}.bytes()
		}, 0, "", 0, 0, paths.ErrTarHeader},
		{"base-256 size past int64", func(*testing.T) []byte {
			return rawBlock{name: "a", typeflag: tar.TypeReg, size: []byte{0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0}}.bytes()
		}, 0, "", 0, 0, paths.ErrTarHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := paths.TarHeaderFromBlock(tc.block(t))
			checkErr(t, err, tc.wantErr)
			if tc.wantErr != nil {
				if h != nil {
					t.Fatalf("a refused block returned a header: %+v", h)
				}
				return
			}
			if h.Typeflag != tc.wantType {
				t.Fatalf("Typeflag = %q, want %q", h.Typeflag, tc.wantType)
			}
			if tc.wantName != "" && h.Name != tc.wantName {
				t.Fatalf("Name = %q, want %q", h.Name, tc.wantName)
			}
			if tc.wantSize >= 0 && h.Size != tc.wantSize {
				t.Fatalf("Size = %d, want %d", h.Size, tc.wantSize)
			}
			if h.Uid != tc.wantUID {
				t.Fatalf("Uid = %d, want %d", h.Uid, tc.wantUID)
			}
		})
	}
}

// TestTarHeaderFromBlockAgreesWithArchiveTar reads the same USTAR block with both decoders.
func TestTarHeaderFromBlockAgreesWithArchiveTar(t *testing.T) {
	in := &tar.Header{Name: "work/out/report.csv", Typeflag: tar.TypeReg, Size: 12, Mode: 0o640, Uid: 1000,
		Gid: 1001, Uname: "guest", Gname: "guests", Format: tar.FormatUSTAR}
	block := firstBlock(t, in)
	want, err := tar.NewReader(bytes.NewReader(append(block, make([]byte, 3*paths.BlockSize)...))).Next()
	if err != nil {
		t.Fatalf("archive/tar: %v", err)
	}
	got, err := paths.TarHeaderFromBlock(block)
	if err != nil {
		t.Fatalf("TarHeaderFromBlock: %v", err)
	}
	if got.Name != want.Name || got.Size != want.Size || got.Mode != want.Mode || got.Uid != want.Uid ||
		got.Gid != want.Gid || got.Uname != want.Uname || got.Gname != want.Gname || !got.ModTime.Equal(want.ModTime) ||
		got.Typeflag != want.Typeflag || got.Format != want.Format {
		t.Fatalf("TarHeaderFromBlock = %+v\narchive/tar      = %+v", got, want)
	}
}

func TestFileStatFromTarHeader(t *testing.T) {
	size := func(n int64) *int64 { return &n }
	cases := []struct {
		name     string
		input    *tar.Header
		wantKind sandbox.EntryKind
		wantSize *int64
	}{
		{"regular file has its size", &tar.Header{Typeflag: tar.TypeReg, Size: 42}, sandbox.EntryFile, size(42)},
		{"empty regular file", &tar.Header{Typeflag: tar.TypeReg}, sandbox.EntryFile, size(0)},
		{"old regular file", &tar.Header{Typeflag: '\x00', Name: "a", Size: 7}, sandbox.EntryFile, size(7)},
		{"old directory by its slash", &tar.Header{Typeflag: '\x00', Name: "a/"}, sandbox.EntryDirectory, nil},
		{"negative size fails closed", &tar.Header{Typeflag: tar.TypeReg, Size: -1}, sandbox.EntryFile, nil},
		{"directory", &tar.Header{Typeflag: tar.TypeDir, Size: 4096}, sandbox.EntryDirectory, nil},
		{"symlink never reports the target's length", &tar.Header{Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Size: 11}, sandbox.EntrySymlink, nil},
		{"hard link", &tar.Header{Typeflag: tar.TypeLink, Linkname: "a"}, sandbox.EntryOther, nil},
		{"fifo", &tar.Header{Typeflag: tar.TypeFifo}, sandbox.EntryOther, nil},
		{"character device", &tar.Header{Typeflag: tar.TypeChar}, sandbox.EntryOther, nil},
		{"block device", &tar.Header{Typeflag: tar.TypeBlock}, sandbox.EntryOther, nil},
		{"contiguous file", &tar.Header{Typeflag: tar.TypeCont, Size: 3}, sandbox.EntryOther, nil},
		{"pax extended header", &tar.Header{Typeflag: tar.TypeXHeader, Size: 30}, sandbox.EntryOther, nil},
		{"pax global header", &tar.Header{Typeflag: tar.TypeXGlobalHeader, Size: 30}, sandbox.EntryOther, nil},
		{"gnu long name", &tar.Header{Typeflag: tar.TypeGNULongName, Size: 130}, sandbox.EntryOther, nil},
		{"gnu long link", &tar.Header{Typeflag: tar.TypeGNULongLink, Size: 130}, sandbox.EntryOther, nil},
		{"gnu sparse", &tar.Header{Typeflag: tar.TypeGNUSparse, Size: 3}, sandbox.EntryOther, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := paths.FileStatFromTarHeader(tc.input, "out/x")
			if st.Path != "out/x" || st.Kind != tc.wantKind {
				t.Fatalf("FileStatFromTarHeader = %+v, want path out/x and kind %s", st, tc.wantKind)
			}
			switch {
			case tc.wantSize == nil && st.Size != nil:
				t.Fatalf("Size = %d, want nil", *st.Size)
			case tc.wantSize != nil && (st.Size == nil || *st.Size != *tc.wantSize):
				t.Fatalf("Size = %v, want %d", st.Size, *tc.wantSize)
			}
		})
	}
	if st := paths.FileStatFromTarHeader(nil, "x"); st != nil {
		t.Fatalf("a nil header gave %+v", st)
	}
}

func TestTarHeaderFromBlockThenFileStat(t *testing.T) {
	block := firstBlock(t, &tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "../outside"})
	h, err := paths.TarHeaderFromBlock(block)
	if err != nil {
		t.Fatal(err)
	}
	st := paths.FileStatFromTarHeader(h, "link")
	if st.Kind != sandbox.EntrySymlink || st.Size != nil {
		t.Fatalf("got %+v, want a symlink with no size", st)
	}
}
