package messages

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// wireTypes lists every wire message and its parts; the tests below walk them.
var wireTypes = []any{
	APIEnvelope{}, APIKey{}, APIResponse{}, APIError{}, APIBlob{}, APISpec{}, APIEgressRule{},
	APIDeclaredOutput{}, APITransferLimits{}, APIHostTools{}, APIAcquireRequest{}, APIAcquireResponse{},
	APISandbox{}, APIExecRequest{}, APIExecResult{}, APIExecResponse{}, APIExecChunk{}, APIRunCodeRequest{},
	APIRunCodeResponse{}, APIWriteFileRequest{}, APIWriteFileResponse{}, APIUploadChunkRequest{},
	APIUploadChunkResponse{}, APIReadFileRequest{}, APIReadFileResponse{}, APIDownloadChunkRequest{},
	APIDownloadChunkResponse{}, APIStatFileRequest{}, APIFileStat{}, APIStatFileResponse{},
	APIRemoveRequest{}, APIRemoveResponse{}, APIListDirRequest{}, APIListDirResponse{},
	APIReclaimRequest{}, APIReclaimResponse{}, APIResetRequest{}, APIResetResponse{},
	APICollectOutputsRequest{}, APIArtifact{}, APICollectOutputsResponse{}, APIDisposeRequest{},
	APIDisposalFailure{}, APIDisposeResponse{}, APIDisposeScopeRequest{}, APIDisposeScopeResponse{},
	APIReapRequest{}, APIReapFailure{}, APIReapResponse{}, APIDeclarationsRequest{}, APIDeclarations{},
	APISandboxLimits{}, APIAttachedIdentity{}, APIBackend{}, APIDeclarationsResponse{},
	APIHealthRequest{}, APIHealthResponse{},
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestWireNamesAreSnakeCase checks every field of every wire type: embedded parts carry no
// tag, every other field a snake_case name, durations end in _ms, and no name repeats
// within one message once the embedded parts are flattened.
func TestWireNamesAreSnakeCase(t *testing.T) {
	for _, v := range wireTypes {
		typ := reflect.TypeOf(v)
		t.Run(typ.Name(), func(t *testing.T) {
			seen := map[string]string{}
			var walk func(reflect.Type)
			walk = func(typ reflect.Type) {
				for f := range typ.Fields() {
					tag := f.Tag.Get("json")
					if f.Anonymous {
						if tag != "" {
							t.Errorf("embedded %s has a json tag %q", f.Name, tag)
						}
						walk(f.Type)
						continue
					}
					name, _, _ := strings.Cut(tag, ",")
					if !snake.MatchString(name) {
						t.Errorf("field %s has json name %q, want snake_case", f.Name, name)
					}
					if strings.HasSuffix(f.Name, "MS") != strings.HasSuffix(name, "_ms") {
						t.Errorf("field %s is named %q: milliseconds and _ms go together", f.Name, name)
					}
					if other, dup := seen[name]; dup {
						t.Errorf("json name %q is used by %s and %s", name, other, f.Name)
					}
					seen[name] = f.Name
				}
			}
			walk(typ)
		})
	}
}

// TestTypeValuesArePairedAndVersioned checks the type constants: each is under the
// versioned prefix, unique, and every request type has its response type.
func TestTypeValuesArePairedAndVersioned(t *testing.T) {
	all := []string{
		APIAcquireRequestType, APIAcquireResponseType, APIExecRequestType, APIExecResponseType,
		APIExecChunkType, APIRunCodeRequestType, APIRunCodeResponseType, APIWriteFileRequestType,
		APIWriteFileResponseType, APIUploadChunkRequestType, APIUploadChunkResponseType,
		APIReadFileRequestType, APIReadFileResponseType, APIDownloadChunkRequestType,
		APIDownloadChunkResponseType, APIStatFileRequestType, APIStatFileResponseType,
		APIRemoveRequestType, APIRemoveResponseType, APIListDirRequestType, APIListDirResponseType,
		APIReclaimRequestType, APIReclaimResponseType, APIResetRequestType, APIResetResponseType,
		APICollectOutputsRequestType, APICollectOutputsResponseType, APIDisposeRequestType,
		APIDisposeResponseType, APIDisposeScopeRequestType, APIDisposeScopeResponseType,
		APIReapRequestType, APIReapResponseType, APIDeclarationsRequestType,
		APIDeclarationsResponseType, APIHealthRequestType, APIHealthResponseType,
	}
	seen := map[string]bool{}
	for _, v := range all {
		if !strings.HasPrefix(v, APITypePrefix) || !strings.Contains(v, "."+APIVersion+".") {
			t.Errorf("type %q is not under %q", v, APITypePrefix)
		}
		if !snake.MatchString(strings.TrimPrefix(v, APITypePrefix)) {
			t.Errorf("type %q does not end in a snake_case name", v)
		}
		if seen[v] {
			t.Errorf("type %q is declared twice", v)
		}
		seen[v] = true
	}
	for v := range seen {
		if op, ok := strings.CutSuffix(v, "_request"); ok && !seen[op+"_response"] {
			t.Errorf("request type %q has no response type", v)
		}
	}
}

// TestEnvelopeFlattens checks that the envelope's fields sit at the top level of a request
// and that bytes travel as base64, as docs/nats-api.md shows.
func TestEnvelopeFlattens(t *testing.T) {
	req := APIWriteFileRequest{
		APIEnvelope: APIEnvelope{Type: APIWriteFileRequestType, Key: &APIKey{Scope: "s", ThreadID: "t", AgentID: "a"}, Sandbox: "h1"},
		Path:        "a.txt", WorkDir: ".", Content: []byte("hi\n"),
	}
	got, err := json.Marshal(req)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	want := `{"type":"maf.sandbox.api.v1.write_file_request","key":{"scope":"s","thread_id":"t","agent_id":"a"},"sandbox":"h1","path":"a.txt","work_dir":".","content":"aGkK"}`
	if string(got) != want {
		t.Fatalf("marshal:\n got %s\nwant %s", got, want)
	}
	var back APIWriteFileRequest
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if !reflect.DeepEqual(back, req) {
		t.Fatalf("round trip: got %+v, want %+v", back, req)
	}
}

// TestDeclarationsKeepNullApartFromEmpty checks that a null capability list (the default
// set) and an empty one (nothing) survive a round trip as different values.
func TestDeclarationsKeepNullApartFromEmpty(t *testing.T) {
	cases := []struct {
		name string
		caps []string
		want string
	}{
		{"null means the default", nil, `"capabilities":null`},
		{"empty means nothing", []string{}, `"capabilities":[]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(APIDeclarations{Capabilities: tc.caps})
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !strings.Contains(string(b), tc.want) {
				t.Fatalf("%s does not hold %s", b, tc.want)
			}
			var back APIDeclarations
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if (back.Capabilities == nil) != (tc.caps == nil) {
				t.Fatalf("capabilities came back as %#v, want %#v", back.Capabilities, tc.caps)
			}
		})
	}
}
