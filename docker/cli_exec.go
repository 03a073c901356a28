package docker

import (
	"context"
)

// Exec implements [Engine].
func (c *cliDriver) Exec(ctx context.Context, req ExecRequest) (ExecOutput, error) {
	if err := req.check(); err != nil {
		return ExecOutput{}, err
	}
	args := []string{"exec"}
	if req.User != "" {
		args = append(args, "--user", req.User)
	}
	if req.WorkDir != "" {
		args = append(args, "-w", req.WorkDir)
	}
	for _, kv := range req.Env {
		args = append(args, "-e", kv)
	}
	args = append(args, req.Target)
	args = append(args, req.Argv...)
	res, err := c.run(ctx, invocation{args: args, maxOutput: req.MaxOutputBytes, output: req.Output})
	if err != nil {
		return ExecOutput{}, err
	}
	out := ExecOutput{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}
	if isFrozenRefusal(res.ExitCode, res.Stdout, res.Stderr) {
		return out, &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPaused}
	}
	if msg, cause, ok := execStartFailure(res.ExitCode, res.Stdout, res.Stderr); ok {
		return out, &ExecStartError{Args: args, Cause: cause, Message: msg, Output: out}
	}
	return out, nil
}
