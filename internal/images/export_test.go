package images

import "context"

// Rebuild is the build step of a static image's rebuild, for the external tests: it builds
// dir as tag, drops the image tag named before, and returns the new image's ID.
func Rebuild(ctx context.Context, dockerPath, tag, dir string) (string, error) {
	prev, err := imageID(ctx, dockerPath, tag)
	if err != nil {
		return "", err
	}
	if err := buildReplacing(ctx, dockerPath, tag, dir, prev); err != nil {
		return "", err
	}
	return imageID(ctx, dockerPath, tag)
}
