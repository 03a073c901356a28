package settings

import (
	"os"

	"github.com/mafsandbox/engine/actors"
)

// FilePlane is the backend's file plane from MAF_SANDBOX_FILE_PLANE (archive, host or auto;
// unset is auto). It fails on any other value.
func FilePlane() (actors.Option, error) {
	p, err := actors.ParseFilePlane(os.Getenv(actors.FilePlaneEnv))
	if err != nil {
		return nil, err
	}
	return actors.WithFilePlane(p), nil
}
