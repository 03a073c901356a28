package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// rawHeader builds one ustar header block by hand, so tests can make what archive/tar won't.
func rawHeader(name string, flag byte, size int64) []byte {
	h := make([]byte, tarBlockSize)
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", size))
	copy(h[136:148], "00000000000\x00")
	h[156] = flag
	copy(h[257:265], "ustar\x0000")
	return fixChecksum(h)
}

func fixChecksum(h []byte) []byte {
	copy(h[148:156], "        ")
	var sum int64
	for _, c := range h {
		sum += int64(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

func pad(b []byte) []byte {
	return append(b, make([]byte, roundBlock(int64(len(b)))-int64(len(b)))...)
}

// extended is a PAX ('x') or GNU long-name ('L') header followed by its data.
func extended(flag byte, data string) []byte {
	return append(rawHeader("././@LongLink", flag, int64(len(data))), pad([]byte(data))...)
}

func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec)
	for {
		s := fmt.Sprintf("%d%s", n, rec)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

func goTar(t *testing.T, format tar.Format, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, h := range hdrs {
		h.Format = format
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := w.Write(bytes.Repeat([]byte("x"), int(h.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadHeader(t *testing.T) {
	longName := strings.Repeat("n", 150)
	longLink := strings.Repeat("l", 150)
	mt := time.Unix(1700000000, 0)
	cases := []struct {
		name    string
		stream  []byte
		want    Entry
		wantErr error
	}{
		{"regular file", goTar(t, tar.FormatUSTAR, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 3, Mode: 0o640, Uid: 10001, Gid: 20001, ModTime: mt}),
			Entry{Name: "f", Type: EntryFile, Typeflag: '0', Size: 3, Mode: 0o640, UID: 10001, GID: 20001}, nil},
		{"directory", goTar(t, tar.FormatUSTAR, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt}),
			Entry{Name: "d/", Type: EntryDir, Typeflag: '5', Mode: 0o755}, nil},
		{"symlink", goTar(t, tar.FormatUSTAR, &tar.Header{Name: "lnk", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Mode: 0o777, ModTime: mt}),
			Entry{Name: "lnk", Type: EntrySymlink, Typeflag: '2', Mode: 0o777, LinkTarget: "/etc/passwd"}, nil},
		{"fifo is other", goTar(t, tar.FormatUSTAR, &tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644, ModTime: mt}),
			Entry{Name: "fifo", Type: EntryOther, Typeflag: '6', Mode: 0o644}, nil},
		{"hard link is other", goTar(t, tar.FormatUSTAR, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "f", ModTime: mt}),
			Entry{Name: "h", Type: EntryOther, Typeflag: '1', LinkTarget: "f"}, nil},
		{"PAX long name and link", goTar(t, tar.FormatPAX, &tar.Header{Name: longName, Typeflag: tar.TypeSymlink, Linkname: longLink, ModTime: mt}),
			Entry{Name: longName, Type: EntrySymlink, Typeflag: '2', LinkTarget: longLink}, nil},
		{"GNU long name and link", goTar(t, tar.FormatGNU, &tar.Header{Name: longName, Typeflag: tar.TypeSymlink, Linkname: longLink, ModTime: mt}),
			Entry{Name: longName, Type: EntrySymlink, Typeflag: '2', LinkTarget: longLink}, nil},
		{"PAX size, uid and gid override", append(extended('x', paxRecord("size", "7")+paxRecord("uid", "3000000")+paxRecord("gid", "5")), rawHeader("f", '0', 0)...),
			Entry{Name: "f", Type: EntryFile, Typeflag: '0', Size: 7, Mode: 0o644, UID: 3000000, GID: 5}, nil},
		{"PAX global then local", append(append(extended('g', paxRecord("path", "g")), extended('x', paxRecord("linkpath", "t"))...), rawHeader("f", '2', 0)...),
			Entry{Name: "g", Type: EntrySymlink, Typeflag: '2', Mode: 0o644, LinkTarget: "t"}, nil},
		{"ustar prefix", func() []byte {
			h := rawHeader("name", '0', 0)
			copy(h[345:], "pre/fix")
			return fixChecksum(h)
		}(), Entry{Name: "pre/fix/name", Type: EntryFile, Typeflag: '0', Mode: 0o644}, nil},
		{"base-256 size", func() []byte {
			h := rawHeader("big", '0', 0)
			copy(h[124:136], []byte{0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0})
			return fixChecksum(h)
		}(), Entry{Name: "big", Type: EntryFile, Typeflag: '0', Size: 1 << 33, Mode: 0o644}, nil},

		{"empty stream", nil, Entry{}, errNoTarHeader},
		{"short block", make([]byte, 100), Entry{}, errNoTarHeader},
		{"end-of-archive only", make([]byte, 1024), Entry{}, errNoTarHeader},
		{"bad checksum", func() []byte { h := rawHeader("f", '0', 0); h[0] = 'g'; return h }(), Entry{}, errTarMetadata},
		{"negative size", func() []byte {
			h := rawHeader("f", '0', 0)
			copy(h[124:136], bytes.Repeat([]byte{0xff}, 12))
			return fixChecksum(h)
		}(), Entry{}, errTarMetadata},
		{"GNU sparse entry", rawHeader("s", 'S', 0), Entry{}, errTarMetadata},
		{"PAX GNU.sparse record", append(extended('x', paxRecord("GNU.sparse.major", "1")), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX length not digits", append(extended('x', "1x path=a\n"), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX missing space", append(extended('x', "12path=abcde\n"), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX no newline", append(extended('x', "11 path=abcd"), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX missing equals", append(extended('x', "11 pathabcd\n"), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX length beyond data", append(extended('x', "99 path=a\n"), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX size not digits", append(extended('x', paxRecord("size", "-1")), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"PAX uid not digits", append(extended('x', paxRecord("uid", "1e3")), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"metadata over 64 KiB", append(extended('L', strings.Repeat("a", 64<<10+1)), rawHeader("f", '0', 0)...), Entry{}, errTarMetadata},
		{"more than 32 header blocks", bytes.Repeat(extended('L', "a"), 17), Entry{}, errTarMetadata},
		{"archive ends after an extended header", extended('x', paxRecord("path", "a")), Entry{}, errTarMetadata},
		{"extended data cut short", extended('L', strings.Repeat("a", 600))[:700], Entry{}, errTarMetadata},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readHeader(bytes.NewReader(tc.stream))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && *got != tc.want {
				t.Fatalf("entry\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

// strictReader fails the test's read if anything asks beyond limit bytes.
type strictReader struct {
	r     io.Reader
	limit int64
	read  int64
}

func (s *strictReader) Read(p []byte) (int, error) {
	if s.read >= s.limit {
		return 0, errors.New("read beyond the allowed bytes")
	}
	if int64(len(p)) > s.limit-s.read {
		p = p[:s.limit-s.read]
	}
	n, err := s.r.Read(p)
	s.read += int64(n)
	return n, err
}

func TestReadEntry(t *testing.T) {
	mt := time.Unix(1700000000, 0)
	file := func(size int64) []byte {
		return goTar(t, tar.FormatUSTAR, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: size, Mode: 0o644, ModTime: mt})
	}
	cases := []struct {
		name      string
		stream    []byte
		max       int64
		allowRead int64 // bytes the reader may consume
		wantBody  []byte
		wantErr   error
	}{
		{"body within cap", file(5), 5, 512 + 5, []byte("xxxxx"), nil},
		{"empty file", file(0), 0, 512, []byte{}, nil},
		{"refused on the header", file(1 << 20), 1024, 512, nil, ErrCapExceeded},
		{"short body", file(100)[:512+40], 1000, 1 << 20, nil, errShortBody},
		{"directory has no body", goTar(t, tar.FormatUSTAR, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, ModTime: mt}), 10, 512, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &strictReader{r: bytes.NewReader(tc.stream), limit: tc.allowRead}
			e, body, err := readEntry(r, tc.max)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !bytes.Equal(body, tc.wantBody) || (tc.wantBody != nil && body == nil) {
				t.Fatalf("body = %q, want %q", body, tc.wantBody)
			}
			if tc.wantErr == nil && e == nil {
				t.Fatal("no entry")
			}
		})
	}
	t.Run("cap error carries size and cap", func(t *testing.T) {
		_, _, err := readEntry(bytes.NewReader(file(1<<20)), 1024)
		var ce *CapExceededError
		if !errors.As(err, &ce) || ce.Size != 1<<20 || ce.Cap != 1024 {
			t.Fatalf("err = %#v", err)
		}
		if !strings.Contains(ce.Error(), "1048576") || !strings.Contains(ce.Error(), "1024") {
			t.Fatalf("message %q lacks size or cap", ce.Error())
		}
	})
	t.Run("short body error carries counts", func(t *testing.T) {
		_, _, err := readEntry(bytes.NewReader(file(100)[:512+40]), 1000)
		var se *shortBodyError
		if !errors.As(err, &se) || se.Expected != 100 || se.Received != 40 {
			t.Fatalf("err = %#v", err)
		}
	})
}

func TestBuildTar(t *testing.T) {
	mt := time.Unix(1700000000, 0)
	entries := append(DirChain([]string{"/maf-sandbox", "/maf-sandbox/work"}, 10001, 20001),
		TarEntry{name: "/maf-sandbox/work/a b.txt", mode: 0o644, uid: 10001, gid: 20001, content: []byte("\x00\xff\r\n"), modTime: mt})
	b, err := BuildTar(entries...)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name     string
		flag     byte
		mode     int64
		uid, gid int
		body     string
	}
	want := []row{
		{"maf-sandbox/", tar.TypeDir, 0o755, 0, 0, ""},
		{"maf-sandbox/work/", tar.TypeDir, 0o755, 10001, 20001, ""},
		{"maf-sandbox/work/a b.txt", tar.TypeReg, 0o644, 10001, 20001, "\x00\xff\r\n"},
	}
	r := tar.NewReader(bytes.NewReader(b))
	for i, w := range want {
		h, err := r.Next()
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		body, _ := io.ReadAll(r)
		got := row{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, string(body)}
		if got != w {
			t.Fatalf("entry %d = %+v, want %+v", i, got, w)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("more entries than built: %v", err)
	}
	// A staged write: the file under its temporary name, then the hard link that commits it.
	b = mustTar(t, FileEntry("/w/.t", []byte("new"), 0o644, 7, 8), LinkEntry("/w/f", "/w/.t", 0o644, 7, 8))
	r = tar.NewReader(bytes.NewReader(b))
	if h, err := r.Next(); err != nil || h.Name != "w/.t" || h.Typeflag != tar.TypeReg || h.Size != 3 {
		t.Fatalf("staged file header = %+v, %v", h, err)
	}
	if h, err := r.Next(); err != nil || h.Name != "w/f" || h.Typeflag != tar.TypeLink || h.Linkname != "w/.t" || h.Size != 0 || h.Uid != 7 || h.Gid != 8 {
		t.Fatalf("link header = %+v, %v", h, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("more entries than built: %v", err)
	}
	// Our own reader reads back what we build.
	e, body, err := readEntry(bytes.NewReader(mustTar(t, FileEntry("/f", []byte("hi"), 0o600, 1, 2))), 10)
	if err != nil || e.Type != EntryFile || string(body) != "hi" || e.UID != 1 || e.GID != 2 || e.Mode != 0o600 {
		t.Fatalf("round trip: %+v %q %v", e, body, err)
	}
}

func mustTar(t *testing.T, es ...TarEntry) []byte {
	t.Helper()
	b, err := BuildTar(es...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildTarRefuses(t *testing.T) {
	cases := []struct {
		name    string
		entries []TarEntry
	}{
		{"nothing", nil},
		{"relative", []TarEntry{FileEntry("a/b", nil, 0o644, 0, 0)}},
		{"root", []TarEntry{DirEntry("/", 0o755, 0, 0)}},
		{"dot-dot", []TarEntry{FileEntry("/a/../b", nil, 0o644, 0, 0)}},
		{"trailing slash", []TarEntry{FileEntry("/a/", nil, 0o644, 0, 0)}},
		{"backslash", []TarEntry{FileEntry(`/a\b`, nil, 0o644, 0, 0)}},
		{"negative owner", []TarEntry{FileEntry("/a", nil, 0o644, -1, 0)}},
		{"mode bits", []TarEntry{FileEntry("/a", nil, 0o10000, 0, 0)}},
		{"directory content", []TarEntry{{name: "/d", dir: true, content: []byte("x")}}},
		{"link before its file", []TarEntry{LinkEntry("/a", "/t", 0o644, 0, 0), FileEntry("/t", nil, 0o644, 0, 0)}},
		{"link to a directory", []TarEntry{DirEntry("/d", 0o755, 0, 0), LinkEntry("/a", "/d", 0o644, 0, 0)}},
		{"link to itself", []TarEntry{FileEntry("/a", nil, 0o644, 0, 0), LinkEntry("/a", "/a", 0o644, 0, 0)}},
		{"relative link", []TarEntry{FileEntry("/t", nil, 0o644, 0, 0), LinkEntry("/a", "t", 0o644, 0, 0)}},
		{"link dot-dot", []TarEntry{FileEntry("/t", nil, 0o644, 0, 0), LinkEntry("/a", "/x/../t", 0o644, 0, 0)}},
		{"link content", []TarEntry{FileEntry("/t", nil, 0o644, 0, 0), {name: "/a", link: "/t", content: []byte("x")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := BuildTar(tc.entries...); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}
