package service

import (
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/wire"
)

// The error codec lives in package wire (wire/errors.go), which the Go client imports too;
// these are the same codes, types and functions under the names this package has always
// given them.

const (
	CodeNoBackend                    = wire.CodeNoBackend
	CodeBackendNotPermitted          = wire.CodeBackendNotPermitted
	CodeCapabilityNotSupported       = wire.CodeCapabilityNotSupported
	CodeOSFamilyNotSupported         = wire.CodeOSFamilyNotSupported
	CodeCapabilityDenied             = wire.CodeCapabilityDenied
	CodeIdentityDenied               = wire.CodeIdentityDenied
	CodeEgressNotEnforced            = wire.CodeEgressNotEnforced
	CodeTransferLimitsNotPermitted   = wire.CodeTransferLimitsNotPermitted
	CodeScopeNotEnforced             = wire.CodeScopeNotEnforced
	CodeUnclean                      = wire.CodeUnclean
	CodeAttachedIdentityNotPermitted = wire.CodeAttachedIdentityNotPermitted
	CodeNotConfined                  = wire.CodeNotConfined
	CodeNotDirectory                 = wire.CodeNotDirectory
	CodeNotRegular                   = wire.CodeNotRegular
	CodePathError                    = wire.CodePathError
	CodeTimeout                      = wire.CodeTimeout
	CodeQueuedTimeout                = wire.CodeQueuedTimeout
	CodeProgramTimeout               = wire.CodeProgramTimeout
	CodeExecOutputLimitExceeded      = wire.CodeExecOutputLimitExceeded
	CodeInvalidArgument              = wire.CodeInvalidArgument
	CodeUnsupported                  = wire.CodeUnsupported
	CodeProtocolViolation            = wire.CodeProtocolViolation
	CodeOutputMissing                = wire.CodeOutputMissing
	CodeOutputNotConfined            = wire.CodeOutputNotConfined
	CodeOutputNotRegular             = wire.CodeOutputNotRegular
	CodeOutputSizeUnknown            = wire.CodeOutputSizeUnknown
	CodeOutputUnreachable            = wire.CodeOutputUnreachable
	CodeTransferCapExceeded          = wire.CodeTransferCapExceeded
	CodeLandingNotConfined           = wire.CodeLandingNotConfined
	CodeOutputSinkRequired           = wire.CodeOutputSinkRequired
	CodeArtifactNameInvalid          = wire.CodeArtifactNameInvalid
	CodeArtifactNameCollision        = wire.CodeArtifactNameCollision
	CodeLandingExists                = wire.CodeLandingExists
	CodeLandingNotText               = wire.CodeLandingNotText
	CodeHostToolNotDeclared          = wire.CodeHostToolNotDeclared
	CodeHostToolIdentityNotAllowed   = wire.CodeHostToolIdentityNotAllowed
	CodeConformanceFailure           = wire.CodeConformanceFailure
	CodeDisposalFailure              = wire.CodeDisposalFailure
	CodeSandboxGone                  = wire.CodeSandboxGone
	CodeImageMissing                 = wire.CodeImageMissing
	CodeProcessNotStarted            = wire.CodeProcessNotStarted
	CodeBadRequest                   = wire.CodeBadRequest
	CodeUnknownSandbox               = wire.CodeUnknownSandbox
	CodeEngineUnavailable            = wire.CodeEngineUnavailable
	CodeInternal                     = wire.CodeInternal
	CodeFamilyNoBackend              = wire.CodeFamilyNoBackend
	CodeFamilyRefused                = wire.CodeFamilyRefused
	CodeFamilyUnsupported            = wire.CodeFamilyUnsupported
	CodeFamilyInvalid                = wire.CodeFamilyInvalid
	CodeFamilyOS                     = wire.CodeFamilyOS
	CodeFamilyOutput                 = wire.CodeFamilyOutput
	CodeFamilyTimeout                = wire.CodeFamilyTimeout
	CodeFamilyProtocol               = wire.CodeFamilyProtocol
	CodeFamilyGone                   = wire.CodeFamilyGone
	CodeIsDirectory                  = wire.CodeIsDirectory
	CodeNotExist                     = wire.CodeNotExist
	CodeExist                        = wire.CodeExist
	CodePermission                   = wire.CodePermission
	CodeENOTDIR                      = wire.CodeENOTDIR
	CodeCanceled                     = wire.CodeCanceled
	CodeDeadlineExceeded             = wire.CodeDeadlineExceeded
	CodeError                        = wire.CodeError
)

// ErrUnavailable is the family of an engine that cannot answer ([wire.ErrUnavailable]).
var ErrUnavailable = wire.ErrUnavailable

// The error types of the protocol that are not package sandbox's (see package wire).
type (
	BadRequestError        = wire.BadRequestError
	UnknownSandboxError    = wire.UnknownSandboxError
	EngineUnavailableError = wire.EngineUnavailableError
	InterruptedError       = wire.InterruptedError
	InternalError          = wire.InternalError
	RemoteError            = wire.RemoteError
)

// Codes lists every code of the table, in table order ([wire.Codes]).
func Codes() []string { return wire.Codes() }

// EncodeError is the wire object of err ([wire.EncodeError]).
func EncodeError(err error) *messages.APIError { return wire.EncodeError(err) }

// DecodeError rebuilds the error e carries ([wire.DecodeError]).
func DecodeError(e *messages.APIError) error { return wire.DecodeError(e) }
