package messages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/mafsandbox/engine/sandbox"
)

// The stable error codes of the wire protocol. Each names exactly one Go error: a type of
// package sandbox, one of this package, or a sentinel. [EncodeError] puts the code of the
// first error in a chain that the table knows on the wire, and [DecodeError] rebuilds that
// same error from it, so errors.As and errors.Is give the same answers on both sides.
const (
	CodeNoBackend                    = "no_backend"
	CodeBackendNotPermitted          = "backend_not_permitted"
	CodeCapabilityNotSupported       = "capability_not_supported"
	CodeOSFamilyNotSupported         = "os_family_not_supported"
	CodeCapabilityDenied             = "capability_denied"
	CodeIdentityDenied               = "identity_denied"
	CodeEgressNotEnforced            = "egress_not_enforced"
	CodeTransferLimitsNotPermitted   = "transfer_limits_not_permitted"
	CodeScopeNotEnforced             = "scope_not_enforced"
	CodeResourcesNotPermitted        = "resources_not_permitted"
	CodeUnclean                      = "unclean"
	CodeAttachedIdentityNotPermitted = "attached_identity_not_permitted"
	CodeNotConfined                  = "not_confined"
	CodeNotDirectory                 = "not_directory"
	CodeNotRegular                   = "not_regular"
	CodePathError                    = "path_error"
	CodeTimeout                      = "timeout"
	CodeQueuedTimeout                = "queued_timeout"
	CodeProgramTimeout               = "program_timeout"
	CodeExecOutputLimitExceeded      = "exec_output_limit_exceeded"
	CodeInvalidArgument              = "invalid_argument"
	CodeUnsupported                  = "unsupported"
	CodeProtocolViolation            = "protocol_violation"
	CodeOutputMissing                = "output_missing"
	CodeOutputNotConfined            = "output_not_confined"
	CodeOutputNotRegular             = "output_not_regular"
	CodeOutputSizeUnknown            = "output_size_unknown"
	CodeOutputUnreachable            = "output_unreachable"
	CodeTransferCapExceeded          = "transfer_cap_exceeded"
	CodeLandingNotConfined           = "landing_not_confined"
	CodeOutputSinkRequired           = "output_sink_required"
	CodeArtifactNameInvalid          = "artifact_name_invalid"
	CodeArtifactNameCollision        = "artifact_name_collision"
	CodeLandingExists                = "landing_exists"
	CodeLandingNotText               = "landing_not_text"
	CodeHostToolNotDeclared          = "host_tool_not_declared"
	CodeHostToolIdentityNotAllowed   = "host_tool_identity_not_allowed"
	CodeConformanceFailure           = "conformance_failure"
	CodeDisposalFailure              = "disposal_failure"
	CodeSandboxGone                  = "sandbox_gone"
	CodeImageMissing                 = "image_missing"
	CodeProcessNotStarted            = "process_not_started"
	CodeProcessNotFound              = "process_not_found"
	CodeProcessExists                = "process_exists"
	CodeProcessLimit                 = "process_limit"
	CodeProcessEnded                 = "process_ended"
	CodeStdinClosed                  = "stdin_closed"
	CodeProcessStartFailed           = "process_start_failed"
	CodeSnapshotNotFound             = "snapshot_not_found"
	CodeSnapshotRefused              = "snapshot_refused"

	// Codes of this package's own errors.
	CodeBadRequest        = "bad_request"
	CodeUnknownSandbox    = "unknown_sandbox"
	CodeEngineUnavailable = "engine_unavailable"
	CodeInterrupted       = "interrupted"
	CodeForbidden         = "forbidden"
	CodeBusy              = "busy"
	CodeInternal          = "internal"

	// Codes of sentinels: sandbox's families, and the standard errors a cause may be.
	CodeFamilyNoBackend   = "family_no_backend"
	CodeFamilyRefused     = "family_refused"
	CodeFamilyUnsupported = "family_unsupported"
	CodeFamilyInvalid     = "family_invalid"
	CodeFamilyOS          = "family_os"
	CodeFamilyOutput      = "family_output"
	CodeFamilyTimeout     = "family_timeout"
	CodeFamilyProtocol    = "family_protocol"
	CodeFamilyGone        = "family_gone"
	CodeIsDirectory       = "is_directory"
	CodeNotExist          = "not_exist"
	CodeExist             = "exist"
	CodePermission        = "permission"
	CodeENOTDIR           = "enotdir"
	CodeCanceled          = "canceled"
	CodeDeadlineExceeded  = "deadline_exceeded"
	// CodeError is a cause the table does not know: it comes back as a plain error with the
	// same text.
	CodeError = "error"
)

// errorCode is one row of the table: a code and either the pointer type of a typed error or
// a sentinel value. An alias row only sends its type under another row's code, and the
// client rebuilds that row's error.
type errorCode struct {
	code     string
	typ      reflect.Type
	sentinel error
	alias    bool
}

func typed[T error](code string) errorCode {
	return errorCode{code: code, typ: reflect.TypeFor[T]()}
}

func alias[T error](code string) errorCode {
	return errorCode{code: code, typ: reflect.TypeFor[T](), alias: true}
}

func sentinel(code string, err error) errorCode { return errorCode{code: code, sentinel: err} }

// errorCodes is the one table of stable codes. A code is never reused for another error and
// never renamed; docs/nats-api.md lists the same table.
var errorCodes = []errorCode{
	typed[*sandbox.NoBackendError](CodeNoBackend),
	typed[*sandbox.BackendNotPermittedError](CodeBackendNotPermitted),
	typed[*sandbox.CapabilityNotSupportedError](CodeCapabilityNotSupported),
	typed[*sandbox.OSFamilyNotSupportedError](CodeOSFamilyNotSupported),
	typed[*sandbox.CapabilityDeniedError](CodeCapabilityDenied),
	typed[*sandbox.IdentityDeniedError](CodeIdentityDenied),
	typed[*sandbox.EgressNotEnforcedError](CodeEgressNotEnforced),
	typed[*sandbox.TransferLimitsNotPermittedError](CodeTransferLimitsNotPermitted),
	typed[*sandbox.ScopeNotEnforcedError](CodeScopeNotEnforced),
	typed[*sandbox.ResourcesNotPermittedError](CodeResourcesNotPermitted),
	typed[*sandbox.UncleanError](CodeUnclean),
	typed[*sandbox.AttachedIdentityNotPermittedError](CodeAttachedIdentityNotPermitted),
	typed[*sandbox.NotConfinedError](CodeNotConfined),
	typed[*sandbox.NotDirectoryError](CodeNotDirectory),
	typed[*sandbox.NotRegularError](CodeNotRegular),
	typed[*sandbox.PathError](CodePathError),
	typed[*sandbox.TimeoutError](CodeTimeout),
	typed[*sandbox.QueuedTimeoutError](CodeQueuedTimeout),
	typed[*sandbox.ProgramTimeoutError](CodeProgramTimeout),
	typed[*sandbox.ExecOutputLimitExceededError](CodeExecOutputLimitExceeded),
	typed[*sandbox.InvalidArgumentError](CodeInvalidArgument),
	typed[*sandbox.UnsupportedError](CodeUnsupported),
	typed[*sandbox.ProtocolError](CodeProtocolViolation),
	typed[*sandbox.OutputMissingError](CodeOutputMissing),
	typed[*sandbox.OutputNotConfinedError](CodeOutputNotConfined),
	typed[*sandbox.OutputNotRegularError](CodeOutputNotRegular),
	typed[*sandbox.OutputSizeUnknownError](CodeOutputSizeUnknown),
	typed[*sandbox.OutputUnreachableError](CodeOutputUnreachable),
	typed[*sandbox.TransferCapExceededError](CodeTransferCapExceeded),
	typed[*sandbox.LandingNotConfinedError](CodeLandingNotConfined),
	typed[*sandbox.OutputSinkRequiredError](CodeOutputSinkRequired),
	typed[*sandbox.ArtifactNameInvalidError](CodeArtifactNameInvalid),
	typed[*sandbox.ArtifactNameCollisionError](CodeArtifactNameCollision),
	typed[*sandbox.LandingExistsError](CodeLandingExists),
	typed[*sandbox.LandingNotTextError](CodeLandingNotText),
	typed[*sandbox.HostToolNotDeclaredError](CodeHostToolNotDeclared),
	typed[*sandbox.HostToolIdentityNotAllowedError](CodeHostToolIdentityNotAllowed),
	typed[*sandbox.ConformanceFailure](CodeConformanceFailure),
	typed[*sandbox.DisposalFailure](CodeDisposalFailure),
	typed[*sandbox.GoneError](CodeSandboxGone),
	typed[*sandbox.ImageMissingError](CodeImageMissing),
	typed[*sandbox.ProcessNotStartedError](CodeProcessNotStarted),
	typed[*sandbox.ProcessNotFoundError](CodeProcessNotFound),
	typed[*sandbox.ProcessExistsError](CodeProcessExists),
	typed[*sandbox.ProcessLimitError](CodeProcessLimit),
	typed[*sandbox.ProcessEndedError](CodeProcessEnded),
	typed[*sandbox.StdinClosedError](CodeStdinClosed),
	typed[*sandbox.ProcessStartError](CodeProcessStartFailed),
	typed[*sandbox.SnapshotNotFoundError](CodeSnapshotNotFound),
	typed[*sandbox.SnapshotRefusedError](CodeSnapshotRefused),

	typed[*BadRequestError](CodeBadRequest),
	typed[*UnknownSandboxError](CodeUnknownSandbox),
	typed[*EngineUnavailableError](CodeEngineUnavailable),
	alias[*sandbox.BackendUnavailableError](CodeEngineUnavailable), // the daemon cannot be reached
	typed[*InterruptedError](CodeInterrupted),
	typed[*ForbiddenError](CodeForbidden),
	typed[*BusyError](CodeBusy),
	typed[*InternalError](CodeInternal),

	sentinel(CodeFamilyNoBackend, sandbox.ErrNoBackend),
	sentinel(CodeFamilyRefused, sandbox.ErrRefused),
	sentinel(CodeFamilyUnsupported, sandbox.ErrUnsupported),
	sentinel(CodeFamilyInvalid, sandbox.ErrInvalid),
	sentinel(CodeFamilyOS, sandbox.ErrOS),
	sentinel(CodeFamilyOutput, sandbox.ErrOutput),
	sentinel(CodeFamilyTimeout, sandbox.ErrTimeout),
	sentinel(CodeFamilyProtocol, sandbox.ErrProtocol),
	sentinel(CodeFamilyGone, sandbox.ErrGone),
	sentinel(CodeIsDirectory, sandbox.ErrIsDirectory),
	sentinel(CodeNotExist, fs.ErrNotExist),
	sentinel(CodeExist, fs.ErrExist),
	sentinel(CodePermission, fs.ErrPermission),
	sentinel(CodeENOTDIR, syscall.ENOTDIR),
	sentinel(CodeCanceled, context.Canceled),
	sentinel(CodeDeadlineExceeded, context.DeadlineExceeded),
}

// families are the sentinels an error of an unknown type is sent as when it matches one,
// the most specific first.
var families = []errorCode{
	sentinel(CodeFamilyGone, sandbox.ErrGone),
	sentinel(CodeFamilyTimeout, sandbox.ErrTimeout),
	sentinel(CodeFamilyRefused, sandbox.ErrRefused),
	sentinel(CodeFamilyUnsupported, sandbox.ErrUnsupported),
	sentinel(CodeFamilyInvalid, sandbox.ErrInvalid),
	sentinel(CodeFamilyOutput, sandbox.ErrOutput),
	sentinel(CodeFamilyOS, sandbox.ErrOS),
	sentinel(CodeFamilyProtocol, sandbox.ErrProtocol),
	sentinel(CodeFamilyNoBackend, sandbox.ErrNoBackend),
}

var (
	codeByType     = map[reflect.Type]errorCode{}
	codeByName     = map[string]errorCode{}
	errorInterface = reflect.TypeFor[error]()
	durationType   = reflect.TypeFor[time.Duration]()
)

func init() {
	for _, c := range errorCodes {
		if c.typ != nil {
			codeByType[c.typ] = c
		}
		if c.alias {
			continue
		}
		if _, dup := codeByName[c.code]; dup {
			panic("service: error code " + c.code + " is in the table twice")
		}
		codeByName[c.code] = c
	}
}

// Codes lists every code of the table, in table order.
func Codes() []string {
	out := make([]string, 0, len(errorCodes))
	for _, c := range errorCodes {
		if !c.alias {
			out = append(out, c.code)
		}
	}
	return out
}

// ErrUnavailable is the family of an engine that cannot answer: none is subscribed, it is
// shutting down, or it is busy. A request that met it may be retried.
var ErrUnavailable = errors.New("service: engine unavailable")

// BadRequestError is a request the engine could not take: malformed JSON, an unknown type
// or field, a missing key, an oversized payload, a chunk out of order. Nothing was changed.
// Field is the JSON path of the field at fault ("timeout_ms", "key.scope",
// "spec.files_in.max_files") when one is; the wire error carries it as error.field too.
type BadRequestError struct {
	Reason string
	Field  string
}

func (e *BadRequestError) Error() string { return "bad request: " + e.Reason }

// Is reports the invalid-argument family.
func (e *BadRequestError) Is(target error) bool { return target == sandbox.ErrInvalid }

// UnknownSandboxError says the engine holds no sandbox under the handle a request named:
// it was disposed, or the engine that handed it out has restarted. Acquire again.
type UnknownSandboxError struct {
	Sandbox string
	Engine  string
}

func (e *UnknownSandboxError) Error() string {
	return fmt.Sprintf("engine %s holds no sandbox %q: it was disposed or the engine restarted; acquire again", e.Engine, e.Sandbox)
}

// Is reports the invalid-argument family.
func (e *UnknownSandboxError) Is(target error) bool { return target == sandbox.ErrInvalid }

// EngineUnavailableError says no engine answered the subject, or the one that did is
// shutting down or over its limits, or its backend cannot reach the Docker daemon (a
// [*sandbox.BackendUnavailableError] on the engine, sent under the same code; Subject is
// then empty). The request did not run; it may be retried.
type EngineUnavailableError struct {
	Subject string
	Reason  string
}

func (e *EngineUnavailableError) Error() string {
	if e.Subject == "" {
		return "engine unavailable: " + e.Reason
	}
	return fmt.Sprintf("engine unavailable on %s: %s", e.Subject, e.Reason)
}

// Is reports [ErrUnavailable].
func (e *EngineUnavailableError) Is(target error) bool { return target == ErrUnavailable }

// InterruptedError says the engine took the call and stopped waiting for it before it
// finished, because the engine's placement lease on the sandbox ended meanwhile: the call may
// have had its effect, in whole or in part, or none. Unlike [EngineUnavailableError] it is not
// a call that did not run, so it is never repeated blindly; acquire again to reach the
// sandbox's owner, and decide from the sandbox's state whether to run the call again.
type InterruptedError struct {
	Reason string
}

func (e *InterruptedError) Error() string { return "interrupted: " + e.Reason }

// ForbiddenError says an engine serving several tenants refused the call: the caller's
// identity, which the NATS server attached to the request, could not be established, or it
// may not use the scope, the handle or the subject the request names. Nothing ran. Retrying
// changes nothing; the engine's tenancy mapping decides (docs/operations.md).
type ForbiddenError struct {
	Reason string
}

func (e *ForbiddenError) Error() string { return "forbidden: " + e.Reason }

// Is reports the refused family.
func (e *ForbiddenError) Is(target error) bool { return target == sandbox.ErrRefused }

// ErrBusy matches a [*BusyError] with errors.Is.
var ErrBusy = errors.New("service: busy")

// BusyError says the caller's NATS account has its limit of calls in flight on the engine
// that answered (an engine serving several tenants bounds each account, so that one cannot
// starve the others). Nothing ran; the engine serves the account again as soon as one of its
// calls has finished, and other accounts meanwhile. The Go client does not repeat the call:
// pace the calls, or retry after a pause.
type BusyError struct {
	Account string
	Limit   int
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("busy: account %q has its limit of %d calls in flight on this engine; retry once one has finished", e.Account, e.Limit)
}

// Is reports [ErrBusy].
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// InternalError is a failure the table has no code for; Message is its text.
type InternalError struct {
	Message string
}

func (e *InternalError) Error() string { return e.Message }

// RemoteError is what a client returns for an error reply: Error is the engine's text and
// Unwrap the error rebuilt from the code, so errors.As and errors.Is see the same types as
// on the engine.
type RemoteError struct {
	Code    string
	Message string
	Err     error
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the rebuilt error.
func (e *RemoteError) Unwrap() error { return e.Err }

// EncodeError turns err into its wire form: the code of the first error in its chain that
// the table knows, else the code of the sandbox family it matches with errors.Is (an error
// type of another package that reports a family), else [CodeInternal]; the whole text; and
// the typed error's fields. A nil err gives nil.
func EncodeError(err error) *APIError {
	if err == nil {
		return nil
	}
	c, found := findCode(err)
	if found == nil {
		// An error of another package's type still says its family through errors.Is: send
		// the family, so the client's errors.Is answers as the engine's does.
		for _, f := range families {
			if errors.Is(err, f.sentinel) {
				return &APIError{Code: f.code, Message: err.Error()}
			}
		}
		return &APIError{Code: CodeInternal, Message: err.Error()}
	}
	out := &APIError{Code: c.code, Message: err.Error()}
	if br, ok := found.(*BadRequestError); ok {
		out.Field = br.Field
	}
	if c.typ != nil {
		detail, derr := json.Marshal(encodeValue(reflect.ValueOf(found).Elem()))
		if derr == nil && string(detail) != "{}" {
			out.Detail = detail
		}
	}
	return out
}

// ErrorCode is the wire code of err, as [EncodeError] gives it, without its text or detail:
// what an event or a metric records of a refusal. "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	c, found := findCode(err)
	if found != nil {
		return c.code
	}
	for _, f := range families {
		if errors.Is(err, f.sentinel) {
			return f.code
		}
	}
	return CodeInternal
}

// findCode walks err's chain, depth first as errors.As does, to the first error whose type
// or value is in the table.
func findCode(err error) (errorCode, error) {
	for err != nil {
		if c, ok := codeByType[reflect.TypeOf(err)]; ok {
			return c, err
		}
		for _, c := range errorCodes {
			if c.sentinel != nil && err == c.sentinel {
				return c, err
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if c, found := findCode(e); found != nil {
					return c, found
				}
			}
			return errorCode{}, nil
		default:
			return errorCode{}, nil
		}
	}
	return errorCode{}, nil
}

// DecodeError rebuilds the error of a wire error: a [*RemoteError] carrying the engine's
// text and wrapping the typed error or sentinel its code names. An unknown code wraps
// nothing. A nil e gives nil.
func DecodeError(e *APIError) error {
	if e == nil {
		return nil
	}
	return &RemoteError{Code: e.Code, Message: e.Message, Err: rebuild(e)}
}

// rebuild makes the error a code names, filled from the detail; nil for an unknown code.
func rebuild(e *APIError) error {
	if e.Code == CodeError {
		return errors.New(e.Message)
	}
	c, ok := codeByName[e.Code]
	if !ok {
		return nil
	}
	if c.sentinel != nil {
		return c.sentinel
	}
	v := reflect.New(c.typ.Elem())
	if len(e.Detail) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(e.Detail, &fields); err == nil {
			decodeStruct(fields, v.Elem())
		}
	}
	if c.code == CodeInternal {
		v.Interface().(*InternalError).Message = e.Message
	}
	return v.Interface().(error)
}

// encodeValue turns a field value into JSON-ready data: structs become objects with
// snake_case names (durations as _ms integers), sets become sorted lists, error fields
// nested wire errors.
func encodeValue(v reflect.Value) any {
	switch {
	case v.Type() == errorInterface:
		if v.IsNil() {
			return nil
		}
		return encodeCause(v.Interface().(error))
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return encodeValue(v.Elem())
	case v.Kind() == reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			out[wireName(f)] = encodeValue(v.Field(i))
		}
		return out
	case v.Type() == durationType:
		return v.Interface().(time.Duration).Milliseconds()
	case v.Kind() == reflect.Map && v.Type().Elem() == reflect.TypeFor[struct{}]():
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		return keys
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8:
		if v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = encodeValue(v.Index(i))
		}
		return out
	}
	return v.Interface()
}

// encodeCause encodes an error held in a field: its own wire error, or a plain "error"
// code for one the table does not know.
func encodeCause(err error) *APIError {
	if _, found := findCode(err); found == nil {
		return &APIError{Code: CodeError, Message: err.Error()}
	}
	return EncodeError(err)
}

// decodeStruct fills v's exported fields from fields by their wire names; a field it
// cannot read stays zero.
func decodeStruct(fields map[string]json.RawMessage, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		raw, ok := fields[wireName(f)]
		if !ok || string(raw) == "null" {
			continue
		}
		decodeValue(raw, v.Field(i))
	}
}

func decodeValue(raw json.RawMessage, v reflect.Value) {
	switch {
	case v.Type() == errorInterface:
		var e APIError
		if json.Unmarshal(raw, &e) == nil {
			if cause := rebuild(&e); cause != nil {
				v.Set(reflect.ValueOf(cause))
			} else {
				v.Set(reflect.ValueOf(errors.New(e.Message)))
			}
		}
	case v.Kind() == reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		decodeValue(raw, p.Elem())
		v.Set(p)
	case v.Kind() == reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil {
			decodeStruct(fields, v)
		}
	case v.Type() == durationType:
		var ms int64
		if json.Unmarshal(raw, &ms) == nil {
			v.SetInt(int64(time.Duration(ms) * time.Millisecond))
		}
	case v.Kind() == reflect.Map && v.Type().Elem() == reflect.TypeFor[struct{}]():
		var keys []string
		if json.Unmarshal(raw, &keys) == nil {
			m := reflect.MakeMapWithSize(v.Type(), len(keys))
			for _, k := range keys {
				m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), reflect.ValueOf(struct{}{}))
			}
			v.Set(m)
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			s := reflect.MakeSlice(v.Type(), len(items), len(items))
			for i, item := range items {
				decodeValue(item, s.Index(i))
			}
			v.Set(s)
		}
	default:
		p := reflect.New(v.Type())
		if json.Unmarshal(raw, p.Interface()) == nil {
			v.Set(p.Elem())
		}
	}
}

// wireName is a field's snake_case name, with _ms appended for a duration.
func wireName(f reflect.StructField) string {
	name := snakeCase(f.Name)
	if f.Type == durationType {
		name += "_ms"
	}
	return name
}

// snakeCase turns a Go field name into snake_case, keeping initialisms whole: ThreadID is
// thread_id, MaxBytesPerFile max_bytes_per_file.
func snakeCase(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
