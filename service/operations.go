package service

import "github.com/mafsandbox/engine/messages"

// operations is every call of the API: its endpoint name, subjects, message types and
// handler. docs/nats-api.md has the same table.
var operations = []operation{
	{"acquire", SubjectAcquireT, SubjectEngineAcquireT, messages.APIAcquireRequestType, messages.APIAcquireResponseType, acquire},
	{"dispose", SubjectDisposeT, SubjectEngineDisposeT, messages.APIDisposeRequestType, messages.APIDisposeResponseType, dispose},
	{"dispose_scope", SubjectDisposeScopeT, SubjectEngineDisposeScopeT, messages.APIDisposeScopeRequestType, messages.APIDisposeScopeResponseType, disposeScope},
	{"reap", SubjectReapT, SubjectEngineReapT, messages.APIReapRequestType, messages.APIReapResponseType, reap},
	{"declarations", SubjectDeclarationsT, SubjectEngineDeclarationsT, messages.APIDeclarationsRequestType, messages.APIDeclarationsResponseType, declarations},
	{"health", SubjectHealthT, SubjectEngineHealthT, messages.APIHealthRequestType, messages.APIHealthResponseType, health},
	{"exec", "", SubjectExecT, messages.APIExecRequestType, messages.APIExecResponseType, exec},
	{"run_code", "", SubjectRunCodeT, messages.APIRunCodeRequestType, messages.APIRunCodeResponseType, runCode},
	{"write_file", "", SubjectWriteFileT, messages.APIWriteFileRequestType, messages.APIWriteFileResponseType, writeFile},
	{"upload_chunk", "", SubjectUploadChunkT, messages.APIUploadChunkRequestType, messages.APIUploadChunkResponseType, uploadChunk},
	{"read_file", "", SubjectReadFileT, messages.APIReadFileRequestType, messages.APIReadFileResponseType, readFile},
	{"download_chunk", "", SubjectDownloadChunkT, messages.APIDownloadChunkRequestType, messages.APIDownloadChunkResponseType, downloadChunk},
	{"stat_file", "", SubjectStatFileT, messages.APIStatFileRequestType, messages.APIStatFileResponseType, statFile},
	{"remove", "", SubjectRemoveT, messages.APIRemoveRequestType, messages.APIRemoveResponseType, remove},
	{"list_dir", "", SubjectListDirT, messages.APIListDirRequestType, messages.APIListDirResponseType, listDir},
	{"reclaim", "", SubjectReclaimT, messages.APIReclaimRequestType, messages.APIReclaimResponseType, reclaim},
	{"reset", "", SubjectResetT, messages.APIResetRequestType, messages.APIResetResponseType, reset},
	{"collect_outputs", "", SubjectCollectOutputsT, messages.APICollectOutputsRequestType, messages.APICollectOutputsResponseType, collectOutputs},
}
