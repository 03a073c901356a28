package service

import "github.com/mafsandbox/engine/wire"

// The subjects live in package wire (wire/subjects.go), which the Go client imports too;
// these are the same constants under the names this package has always given them.

const (
	SubjectAcquire             = wire.SubjectAcquire
	SubjectAcquireT            = wire.SubjectAcquireT
	SubjectDispose             = wire.SubjectDispose
	SubjectDisposeT            = wire.SubjectDisposeT
	SubjectDisposeScope        = wire.SubjectDisposeScope
	SubjectDisposeScopeT       = wire.SubjectDisposeScopeT
	SubjectReap                = wire.SubjectReap
	SubjectReapT               = wire.SubjectReapT
	SubjectDeclarations        = wire.SubjectDeclarations
	SubjectDeclarationsT       = wire.SubjectDeclarationsT
	SubjectHealth              = wire.SubjectHealth
	SubjectHealthT             = wire.SubjectHealthT
	SubjectEngineAcquire       = wire.SubjectEngineAcquire
	SubjectEngineAcquireT      = wire.SubjectEngineAcquireT
	SubjectEngineDispose       = wire.SubjectEngineDispose
	SubjectEngineDisposeT      = wire.SubjectEngineDisposeT
	SubjectEngineDisposeScope  = wire.SubjectEngineDisposeScope
	SubjectEngineDisposeScopeT = wire.SubjectEngineDisposeScopeT
	SubjectEngineReap          = wire.SubjectEngineReap
	SubjectEngineReapT         = wire.SubjectEngineReapT
	SubjectEngineDeclarations  = wire.SubjectEngineDeclarations
	SubjectEngineDeclarationsT = wire.SubjectEngineDeclarationsT
	SubjectEngineHealth        = wire.SubjectEngineHealth
	SubjectEngineHealthT       = wire.SubjectEngineHealthT
	SubjectEngineAlive         = wire.SubjectEngineAlive
	SubjectEngineAliveT        = wire.SubjectEngineAliveT
	SubjectExec                = wire.SubjectExec
	SubjectExecT               = wire.SubjectExecT
	SubjectRunCode             = wire.SubjectRunCode
	SubjectRunCodeT            = wire.SubjectRunCodeT
	SubjectWriteFile           = wire.SubjectWriteFile
	SubjectWriteFileT          = wire.SubjectWriteFileT
	SubjectUploadChunk         = wire.SubjectUploadChunk
	SubjectUploadChunkT        = wire.SubjectUploadChunkT
	SubjectReadFile            = wire.SubjectReadFile
	SubjectReadFileT           = wire.SubjectReadFileT
	SubjectDownloadChunk       = wire.SubjectDownloadChunk
	SubjectDownloadChunkT      = wire.SubjectDownloadChunkT
	SubjectStatFile            = wire.SubjectStatFile
	SubjectStatFileT           = wire.SubjectStatFileT
	SubjectRemove              = wire.SubjectRemove
	SubjectRemoveT             = wire.SubjectRemoveT
	SubjectListDir             = wire.SubjectListDir
	SubjectListDirT            = wire.SubjectListDirT
	SubjectReclaim             = wire.SubjectReclaim
	SubjectReclaimT            = wire.SubjectReclaimT
	SubjectReset               = wire.SubjectReset
	SubjectResetT              = wire.SubjectResetT
	SubjectCollectOutputs      = wire.SubjectCollectOutputs
	SubjectCollectOutputsT     = wire.SubjectCollectOutputsT
	DefaultPrefix              = wire.DefaultPrefix
	QueueGroup                 = wire.QueueGroup
	ServiceName                = wire.ServiceName
	SubjectFingerprint         = wire.SubjectFingerprint
	SubjectFingerprintT        = wire.SubjectFingerprintT
	SubjectRunProgram          = wire.SubjectRunProgram
	SubjectRunProgramT         = wire.SubjectRunProgramT
)

// Shared formats the subject of a shared template for prefix ([wire.Shared]).
func Shared(template, prefix string) string { return wire.Shared(template, prefix) }

// Engine formats the subject of a per-engine template for prefix and engine ([wire.Engine]).
func Engine(template, prefix, engine string) string { return wire.Engine(template, prefix, engine) }
