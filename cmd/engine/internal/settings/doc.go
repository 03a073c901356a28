// Package settings holds the settings more than one of the engine binary's verbs reads: the
// repeatable --label flag (serve, demo) and the file plane from MAF_SANDBOX_FILE_PLANE
// (serve, demo, bench).
package settings
