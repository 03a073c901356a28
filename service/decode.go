package service

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/mafsandbox/engine/messages"
)

// The refusals of request bodies, in the API's own terms: a reply names the JSON field (its
// path from the body's root, "spec.files_in.max_files") and the rule it broke, never a Go
// type. Each is a [*BadRequestError] whose Field carries that path.

// bodyless are the requests that need nothing but their type: an empty body is taken as
// {"type": <the subject's request type>}.
var bodyless = map[string]bool{
	messages.APIHealthRequestType:       true,
	messages.APIDeclarationsRequestType: true,
}

// orBodyless returns data, or the minimal request of reqType when data is empty (only white
// space) and reqType needs no body.
func orBodyless(data []byte, reqType string) []byte {
	if len(bytes.TrimSpace(data)) == 0 && bodyless[reqType] {
		return []byte(`{"type":"` + reqType + `"}`)
	}
	return data
}

// bodyError describes a JSON decoding error of a request body.
func bodyError(err error) *messages.BadRequestError {
	var (
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		corrupt base64.CorruptInputError
	)
	switch {
	case errors.Is(err, io.EOF):
		return &messages.BadRequestError{Reason: "the request body is empty: send a JSON object with a type"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &messages.BadRequestError{Reason: "malformed JSON: the request body ends inside its JSON object"}
	case errors.As(err, &syntax):
		if syntax.Offset == 0 || strings.Contains(syntax.Error(), "unexpected end") {
			return &messages.BadRequestError{Reason: "malformed JSON: the request body is empty or ends inside its JSON object"}
		}
		return &messages.BadRequestError{Reason: fmt.Sprintf("malformed JSON at byte %d of the request body", syntax.Offset)}
	case errors.As(err, &typ):
		field := wirePath(typ.Field)
		if field == "" {
			return &messages.BadRequestError{Reason: fmt.Sprintf("malformed request: the body must be a JSON object, not %s", article(typ.Value))}
		}
		return &messages.BadRequestError{Field: field, Reason: fmt.Sprintf("field %s must be %s, not %s", field, jsonKind(typ.Type), article(typ.Value))}
	case errors.As(err, &corrupt):
		return &messages.BadRequestError{Reason: fmt.Sprintf("a bytes field is not standard base64 (bad input at byte %d of its value)", int64(corrupt))}
	}
	// encoding/json reports an unknown field (DisallowUnknownFields) only as this text.
	if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return &messages.BadRequestError{Field: name, Reason: fmt.Sprintf("unknown field %q: this request has no such field", name)}
	}
	return &messages.BadRequestError{Reason: "malformed request: the body is not a JSON object of this request's fields"}
}

// wirePath drops the Go names of embedded structs from a decoder's field path
// ("APIEnvelope.key.scope" is key.scope): every wire name is snake_case.
func wirePath(path string) string {
	var keep []string
	for seg := range strings.SplitSeq(path, ".") {
		if seg != "" && unicode.IsUpper(rune(seg[0])) {
			continue
		}
		keep = append(keep, seg)
	}
	return strings.Join(keep, ".")
}

// jsonKind names the JSON a Go type is read from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value of another kind"
	}
	if t == reflect.TypeFor[time.Duration]() {
		return "an integer"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(jsonKind(t.Elem()), "an "), "a ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a value of another kind"
}

// article puts "a"/"an" before a decoder's value description ("array", "number 1.5").
func article(v string) string {
	switch {
	case v == "":
		return "that value"
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	case strings.IndexByte("aeiou", v[0]) >= 0:
		return "an " + v
	}
	return "a " + v
}

// checkFields applies the rules a request's fields must meet beyond their JSON types: the
// required, positive timeouts. (A reap's older_than_ms keeps its invalid_argument refusal.)
func checkFields(v any) error {
	positive := func(field string, ms int64) error {
		if ms > 0 {
			return nil
		}
		if ms == 0 {
			return &messages.BadRequestError{Field: field, Reason: fmt.Sprintf("field %s is required: a positive number of milliseconds", field)}
		}
		return &messages.BadRequestError{Field: field, Reason: fmt.Sprintf("field %s must be a positive number of milliseconds, not %d", field, ms)}
	}
	switch r := v.(type) {
	case *messages.APIExecRequest:
		return positive("timeout_ms", r.TimeoutMS)
	case *messages.APIRunCodeRequest:
		return positive("timeout_ms", r.TimeoutMS)
	case *messages.APIReclaimRequest:
		return positive("timeout_ms", r.TimeoutMS)
	case *messages.APIResetRequest:
		return positive("timeout_ms", r.TimeoutMS)
	}
	return nil
}
