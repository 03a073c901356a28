package main

import (
	"os"

	"github.com/mafsandbox/engine/actors"
)

// filePlaneOption is the backend's file plane from MAF_SANDBOX_FILE_PLANE (archive, host or
// auto; unset is auto).
func filePlaneOption() (actors.Option, error) {
	p, err := actors.ParseFilePlane(os.Getenv(actors.FilePlaneEnv))
	if err != nil {
		return nil, err
	}
	return actors.WithFilePlane(p), nil
}
