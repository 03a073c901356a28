package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/cmd/engine/internal/embedded"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// The process rows (group "process"): a backend of its own with the exec channel's
// supervisor and processes' output on JetStream (an embedded NATS server), as engine serve
// runs them, beside docker's own ways of doing the same in the same run.
const (
	outputBytes = 64 << 20 // process_output_mib_per_s
	outputReps  = 3        // the output rows move 64 MiB each time
	// resumeLines of line are process_resume_10mib's output: 10,485,720 bytes, whole lines,
	// which is what docker logs gives back of a container's output (a last line without its
	// newline waits in the daemon).
	resumeLines = (10 << 20) / (len(line) + 1)
	resumeBytes = int64(resumeLines * (len(line) + 1))
	// line is what the output rows write, over and over: text lines, as a program's logs
	// are (docker's json-file logging keeps lines).
	line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"
)

// processes measures the process rows.
func (r *runner) processes(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	b, stop, err := r.processBackend(ctx)
	if err != nil {
		return err
	}
	defer stop()
	spec, err := sandbox.NewSpec("bench-process", sandbox.WithImage(r.cfg.Image), sandbox.WithRequires(sandbox.Exec, sandbox.Processes))
	if err != nil {
		return err
	}
	key := r.key("process")
	got, err := b.Acquire(ctx, key, spec)
	if err != nil {
		return err
	}
	defer b.Dispose(context.WithoutCancel(ctx), key, sandbox.DisposeOptions{})
	sb := got.(*actors.Sandbox)
	n := 0
	row, err := r.time(ctx, "process_start", nil, func() error {
		n++
		_, err := sb.StartProcess(ctx, sandbox.ProcessSpec{ID: "start-" + strconv.Itoa(n), Command: sandbox.Argv("true")})
		return err
	})
	if err != nil {
		return err
	}
	row.Note = "a background true on a warm sandbox, on its supervisor"
	report(row)
	row, err = r.time(ctx, "baseline_docker_exec_d_true", nil, func() error { return r.docker(ctx, "exec", "-d", sb.InstanceID(), "true") })
	if err != nil {
		return err
	}
	report(row)
	if err := r.outputRows(ctx, sb, report); err != nil {
		return err
	}
	return r.resumeRows(ctx, sb, report)
}

// processBackend is a backend with the supervisor and a process store on an embedded NATS
// server of its own; stop closes all of it.
func (r *runner) processBackend(ctx context.Context) (*actors.Backend, func(), error) {
	execd, err := images.ExecSupervisor(ctx, r.dockerPath())
	if err != nil {
		return nil, nil, fmt.Errorf("process rows: the supervisor: %w", err)
	}
	dir, err := os.MkdirTemp("", "maf-sandbox-bench-nats-")
	if err != nil {
		return nil, nil, err
	}
	srv, err := embedded.Start("127.0.0.1:0", dir, zap.NewNop())
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err == nil {
		var store *events.ProcessStreams
		if store, err = events.NewProcessStreams(nc); err == nil {
			var b *actors.Backend
			b, err = actors.Create(ctx, docker.Config{DockerPath: r.cfg.DockerPath}, actors.WithLogger(zap.NewNop()),
				actors.WithExecChannel(execd), actors.WithProcessStore(store))
			if err == nil {
				return b, func() {
					b.Close(context.WithoutCancel(ctx))
					nc.Close()
					srv.Shutdown()
					os.RemoveAll(dir)
				}, nil
			}
		}
		nc.Close()
	}
	srv.Shutdown()
	os.RemoveAll(dir)
	return nil, nil, err
}

// readToEnd follows id's output from from to its end through the store and returns the bytes
// it read; a cut (a byte not accounted for) fails it.
func readToEnd(ctx context.Context, sb *actors.Sandbox, id string, from int64) (int64, error) {
	var n int64
	for {
		out, err := sb.ReadProcessOutput(ctx, id, from, sandbox.ReadOptions{MaxBytes: 1 << 20, Wait: 10 * time.Second})
		if err != nil {
			return n, err
		}
		if out.Cut != nil {
			return n, fmt.Errorf("%d bytes of %s not accounted for (%s)", out.Cut.Bytes(), id, out.Cut.Reason)
		}
		for _, c := range out.Chunks {
			n += int64(len(c.Data))
		}
		from = out.Next
		if out.Exit != nil {
			return n, nil
		}
	}
}

// outputRows: a process writes 64 MiB to stdout and a reader follows it through JetStream;
// beside it, docker exec streaming the same to the client.
func (r *runner) outputRows(ctx context.Context, sb *actors.Sandbox, report func(Row)) error {
	n := 0
	row, err := r.timeN(ctx, "process_output_mib_per_s", outputReps, nil, func() error {
		n++
		id := "out-" + strconv.Itoa(n)
		if _, err := sb.StartProcess(ctx, sandbox.ProcessSpec{ID: id, Command: sandbox.Shell(fmt.Sprintf("yes %s | head -c %d", line, outputBytes))}); err != nil {
			return err
		}
		got, err := readToEnd(ctx, sb, id, 0)
		if err == nil && got != outputBytes {
			err = fmt.Errorf("read %d bytes of %d", got, outputBytes)
		}
		return err
	})
	if err != nil {
		return err
	}
	report(rate(row, outputBytes, "64 MiB written to stdout, read through JetStream, every byte accounted for"))
	row, err = r.timeN(ctx, "baseline_docker_exec_output_mib_per_s", outputReps, nil, func() error {
		return r.dockerCount(ctx, outputBytes, "exec", "-i", sb.InstanceID(), "sh", "-c", fmt.Sprintf("yes %s | head -c %d", line, outputBytes))
	})
	if err != nil {
		return err
	}
	report(rate(row, outputBytes, "docker exec -i: the same 64 MiB streamed to the client"))
	return nil
}

// resumeRows: a reader that joins after a process wrote 10 MiB reads them from sequence 0;
// beside it, docker logs reading a container's 10 MiB of logs.
func (r *runner) resumeRows(ctx context.Context, sb *actors.Sandbox, report func(Row)) error {
	id := "resume"
	if _, err := sb.StartProcess(ctx, sandbox.ProcessSpec{ID: id, Command: sandbox.Shell(fmt.Sprintf("yes %s | head -n %d", line, resumeLines))}); err != nil {
		return err
	}
	if _, err := sb.WaitProcess(ctx, id); err != nil { // its exit stored: everything was
		return err
	}
	row, err := r.time(ctx, "process_resume_10mib", nil, func() error {
		got, err := readToEnd(ctx, sb, id, 0)
		if err == nil && got != resumeBytes {
			err = fmt.Errorf("read %d bytes of %d", got, resumeBytes)
		}
		return err
	})
	if err != nil {
		return err
	}
	row.Note = "10 MiB (whole lines) written before the reader joined, read from sequence 0 through JetStream"
	report(row)
	logs := "maf-sandbox-bench-logs-" + randomHex()
	args := []string{"run", "-d", "--name", logs, "--log-opt", "max-size=100m"}
	for k, v := range r.cfg.Labels {
		args = append(args, "--label", k+"="+v)
	}
	if err := r.docker(ctx, append(args, r.cfg.Image, "sh", "-c", fmt.Sprintf("yes %s | head -n %d; sleep 3600", line, resumeLines))...); err != nil {
		return err
	}
	defer func() { _ = r.docker(context.WithoutCancel(ctx), "rm", "-f", logs) }()
	if err := r.dockerCount(ctx, resumeBytes, "logs", "-f", "--tail", "all", logs); err != nil {
		return err
	}
	row, err = r.time(ctx, "baseline_docker_logs_10mib", nil, func() error { return r.dockerCount(ctx, resumeBytes, "logs", logs) })
	if err != nil {
		return err
	}
	row.Note = "docker logs of a container's 10 MiB of output, from its start"
	report(row)
	return nil
}

// dockerCount runs docker with args and reads its stdout until want bytes came (then stops
// it: docker logs -f would follow on).
func (r *runner) dockerCount(ctx context.Context, want int64, args ...string) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.dockerPath(), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	got, err := io.Copy(io.Discard, io.LimitReader(bufio.NewReaderSize(out, 1<<20), want))
	cancel()
	_ = cmd.Wait()
	if err == nil && got != want {
		err = fmt.Errorf("docker %s: read %d bytes of %d", strings.Join(args, " "), got, want)
	}
	return err
}

// rate notes a row's throughput: bytes over its median.
func rate(row Row, bytes int64, note string) Row {
	mibs := float64(bytes) / (1 << 20) / (row.MedianMS / 1000)
	row.Note = fmt.Sprintf("%.1f MiB/s (median); %s", mibs, note)
	return row
}
