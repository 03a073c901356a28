package messages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// TestEveryErrorTypeHasACode reads package sandbox's source and checks that every type with
// an Error method is in the table: a new error type without a code would cross NATS as an
// internal error and lose its errors.As.
func TestEveryErrorTypeHasACode(t *testing.T) {
	dir := filepath.Join("..", "sandbox")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatalf("glob: %v", err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Error" || !ast.IsExported(recvName(fn)) {
				continue
			}
			names = append(names, recvName(fn))
		}
	}
	if len(names) < 30 {
		t.Fatalf("found only %d error types in %s: the scan is broken", len(names), dir)
	}
	var inTable []string
	for _, c := range errorCodes {
		if c.typ != nil && c.typ.Elem().PkgPath() == reflect.TypeFor[sandbox.Key]().PkgPath() {
			inTable = append(inTable, c.typ.Elem().Name())
		}
	}
	for _, n := range names {
		if !slices.Contains(inTable, n) {
			t.Errorf("sandbox.%s has no code in the wire error table", n)
		}
	}
}

func recvName(fn *ast.FuncDecl) string {
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// TestEveryCodeRoundTrips fills every typed error of the table with non-zero values, sends
// it through JSON and checks that the rebuilt error is equal, that errors.As finds it and
// that it reports the same families.
func TestEveryCodeRoundTrips(t *testing.T) {
	families := []error{sandbox.ErrNoBackend, sandbox.ErrRefused, sandbox.ErrUnsupported, sandbox.ErrInvalid,
		sandbox.ErrOS, sandbox.ErrOutput, sandbox.ErrTimeout, sandbox.ErrProtocol, sandbox.ErrGone, sandbox.ErrIsDirectory,
		fs.ErrNotExist, fs.ErrPermission, syscall.ENOTDIR, context.Canceled, ErrUnavailable}
	for _, c := range errorCodes {
		if c.alias {
			continue // TestAliasesRebuildTheirCodesError
		}
		t.Run(c.code, func(t *testing.T) {
			var orig error
			if c.sentinel != nil {
				orig = fmt.Errorf("wrapped: %w", c.sentinel)
			} else {
				v := reflect.New(c.typ.Elem())
				fill(v.Elem())
				orig = v.Interface().(error)
			}
			w := EncodeError(orig)
			if w.Code != c.code {
				t.Fatalf("code %q, want %q", w.Code, c.code)
			}
			b, err := json.Marshal(w)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var back APIError
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			got := DecodeError(&back)
			if got.Error() != orig.Error() {
				t.Errorf("text %q, want %q", got.Error(), orig.Error())
			}
			if c.sentinel != nil {
				if !errors.Is(got, c.sentinel) {
					t.Errorf("errors.Is(%v, %v) = false", got, c.sentinel)
				}
				return
			}
			target := reflect.New(c.typ)
			if !errors.As(got, target.Interface()) {
				t.Fatalf("errors.As(%T) found nothing in %#v", target.Elem().Interface(), got)
			}
			if !reflect.DeepEqual(target.Elem().Interface(), orig) {
				t.Errorf("rebuilt %#v\nwant     %#v\nwire %s", target.Elem().Interface(), orig, b)
			}
			for _, f := range families {
				if errors.Is(got, f) != errors.Is(orig, f) {
					t.Errorf("errors.Is(_, %v): remote %t, local %t", f, errors.Is(got, f), errors.Is(orig, f))
				}
			}
		})
	}
}

// fill sets every exported field of v to a non-zero value of its type.
func fill(v reflect.Value) {
	switch {
	case v.Type() == errorInterface:
		v.Set(reflect.ValueOf(&sandbox.NotConfinedError{Path: "../x", WorkDir: "/w", Reason: "escapes"}))
	case v.Type() == durationType:
		v.SetInt(int64(1500 * time.Millisecond))
	}
	if v.Type() == errorInterface || v.Type() == durationType {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.String:
		v.SetString("v-" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Uint8:
		v.SetUint(0xff)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k)
		m.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
	}
}

// TestEncodeFindsTheTypedErrorInsideWrappers checks the cases a handler meets: a typed
// error wrapped by a prefix, a path error whose cause is a sentinel, an error of no known
// type, and a nested output error.
func TestEncodeFindsTheTypedErrorInsideWrappers(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		wantCode string
		check    func(error) bool
	}{
		{"wrapped typed", fmt.Errorf("exec in c1: %w", &sandbox.TimeoutError{Op: "exec", Timeout: time.Second}), CodeTimeout,
			func(err error) bool {
				var te *sandbox.TimeoutError
				return errors.As(err, &te) && te.Timeout == time.Second
			}},
		{"path error, not exist", &sandbox.PathError{Op: "read", Path: "a", Err: fs.ErrNotExist}, CodePathError,
			func(err error) bool { return errors.Is(err, fs.ErrNotExist) && errors.Is(err, sandbox.ErrOS) }},
		{"path error, is a directory", &sandbox.PathError{Op: "read", Path: "d", Err: sandbox.ErrIsDirectory}, CodePathError,
			func(err error) bool { return errors.Is(err, sandbox.ErrIsDirectory) }},
		{"path error, unknown cause", &sandbox.PathError{Op: "remove", Path: "d", Err: errors.New("rm exited 1")}, CodePathError,
			func(err error) bool {
				var pe *sandbox.PathError
				return errors.As(err, &pe) && pe.Err.Error() == "rm exited 1"
			}},
		{"unknown", errors.New("the daemon said no"), CodeInternal,
			func(err error) bool {
				var ie *InternalError
				return errors.As(err, &ie) && ie.Message == "the daemon said no"
			}},
		{"nested output error", &sandbox.OutputNotConfinedError{Path: "o", Err: &sandbox.NotConfinedError{Path: "o", WorkDir: "/w", Reason: "link"}}, CodeOutputNotConfined,
			func(err error) bool {
				var nc *sandbox.NotConfinedError
				return errors.As(err, &nc) && nc.Reason == "link" && errors.Is(err, sandbox.ErrOutput)
			}},
		{"cancelled", fmt.Errorf("exec: %w", context.Canceled), CodeCanceled,
			func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"another package's type in a family", &familyOnly{}, CodeFamilyUnsupported,
			func(err error) bool { return errors.Is(err, sandbox.ErrUnsupported) }},
		{"joined", errors.Join(errors.New("first"), &sandbox.UnsupportedError{Backend: "b", Op: "o"}), CodeUnsupported,
			func(err error) bool { return errors.Is(err, sandbox.ErrUnsupported) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := EncodeError(tc.err)
			if w.Code != tc.wantCode {
				t.Fatalf("code %q, want %q", w.Code, tc.wantCode)
			}
			got := DecodeError(w)
			if got.Error() != tc.err.Error() {
				t.Errorf("text %q, want %q", got.Error(), tc.err.Error())
			}
			if !tc.check(got) {
				t.Errorf("the rebuilt error %#v fails its check", got)
			}
		})
	}
}

func TestSnakeCase(t *testing.T) {
	cases := []struct{ in, want string }{
		{"ThreadID", "thread_id"}, {"InstanceID", "instance_id"}, {"MaxBytesPerFile", "max_bytes_per_file"},
		{"Err", "err"}, {"AtCallTime", "at_call_time"}, {"OutputBytes", "output_bytes"}, {"HTTPServer", "http_server"},
	}
	for _, tc := range cases {
		if got := snakeCase(tc.in); got != tc.want {
			t.Errorf("snakeCase(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUnknownCodeKeepsTheText(t *testing.T) {
	got := DecodeError(&APIError{Code: "from_a_newer_engine", Message: "something new"})
	var re *RemoteError
	if !errors.As(got, &re) || re.Err != nil || got.Error() != "something new" {
		t.Fatalf("got %#v", got)
	}
}

// familyOnly is an error type the table does not know that reports a family, as
// actors.EgressTopologyError does.
type familyOnly struct{}

func (*familyOnly) Error() string        { return "egress network n: the engine cannot build it" }
func (*familyOnly) Is(target error) bool { return target == sandbox.ErrUnsupported }

// TestAliasesRebuildTheirCodesError: a backend that cannot reach its daemon is sent as
// engine_unavailable, and the client rebuilds an [*EngineUnavailableError] that carries the
// reason and reports [ErrUnavailable].
func TestAliasesRebuildTheirCodesError(t *testing.T) {
	orig := fmt.Errorf("acquire: %w", &sandbox.BackendUnavailableError{Backend: "docker", Reason: "the Docker daemon cannot be reached",
		Err: errors.New("dial unix /nowhere.sock: connect: no such file or directory")})
	w := EncodeError(orig)
	if w.Code != CodeEngineUnavailable {
		t.Fatalf("code %q, want %q", w.Code, CodeEngineUnavailable)
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back APIError
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := DecodeError(&back)
	var eu *EngineUnavailableError
	if !errors.As(got, &eu) || eu.Reason != "the Docker daemon cannot be reached" || !errors.Is(got, ErrUnavailable) {
		t.Fatalf("rebuilt %#v (%v)", got, eu)
	}
	if got.Error() != orig.Error() {
		t.Fatalf("text %q, want %q", got.Error(), orig.Error())
	}
	if slices.Contains(Codes(), "") || len(Codes()) != len(errorCodes)-1 {
		t.Fatalf("Codes() lists an alias: %v", Codes())
	}
}
