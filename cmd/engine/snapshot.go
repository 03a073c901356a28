package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// snapshotVerb is "engine snapshot ACTION" and "engine pause": a sandbox's sleep and
// snapshots through a serving engine (docs/snapshots.md). Every action prints JSON.
type snapshotVerb struct {
	action                            string // take, list, restore, fork, delete; pause for "engine pause"
	conn                              natsFlags
	logs                              logFlags
	image, kind, scope, thread, agent string
	id, agents                        string
	callTimeout                       time.Duration
}

const snapshotUsage = `Usage:
  engine snapshot take    --scope S --thread T --agent A [--kind K --image I]   snapshot the key's sandbox
  engine snapshot list    --scope S --thread T                                   the conversation's snapshots
  engine snapshot restore --id ID --scope S --thread T --agent A [--kind --image] put the key's sandbox back to it
  engine snapshot fork    --id ID --scope S --thread T --agents a1,a2,...        new sandboxes, one per agent
  engine snapshot delete  --id ID
  engine pause            --scope S --thread T --agent A [--kind K --image I]   pause the key's sandbox now

The key's sandbox is acquired first (take, pause): an acquire of a key that has one returns it.
`

// snapshotCmd parses args into a [snapshotVerb] and runs it; pause is "engine pause".
func snapshotCmd(ctx context.Context, args []string, pause bool) error {
	v := &snapshotVerb{}
	if pause {
		v.action = "pause"
	} else if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		v.action, args = args[0], args[1:]
	}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *snapshotVerb) parse(args []string) error {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	v.conn.register(fs)
	v.logs.register(fs)
	_ = fs.Set("log-level", envOr("MAF_SANDBOX_LOG_LEVEL", "warn"))
	fs.StringVar(&v.image, "image", envOr("MAF_SANDBOX_IMAGE", images.BusyboxTag), "the sandbox's image (env MAF_SANDBOX_IMAGE)")
	fs.StringVar(&v.kind, "kind", "run", "the sandbox's kind")
	fs.StringVar(&v.scope, "scope", envOr("MAF_SANDBOX_SCOPE", "run"), "key scope (env MAF_SANDBOX_SCOPE)")
	fs.StringVar(&v.thread, "thread", "", "key thread")
	fs.StringVar(&v.agent, "agent", "run", "key agent")
	fs.StringVar(&v.id, "id", "", "the snapshot's ID (restore, fork, delete)")
	fs.StringVar(&v.agents, "agents", "", "fork: comma-separated agents, one new sandbox each under --scope and --thread")
	fs.DurationVar(&v.callTimeout, "call-timeout", 5*time.Minute, "bound on each call to the engine")
	fs.Usage = func() { fmt.Fprint(fs.Output(), snapshotUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("snapshot: unexpected arguments %q", fs.Args())
	}
	switch v.action {
	case "take", "list", "pause":
	case "restore", "delete":
		if v.id == "" {
			return fmt.Errorf("snapshot %s: --id is required", v.action)
		}
	case "fork":
		if v.id == "" || v.agents == "" {
			return fmt.Errorf("snapshot fork: --id and --agents are required")
		}
	default:
		return fmt.Errorf("snapshot: unknown action %q\n\n%s", v.action, snapshotUsage)
	}
	return nil
}

func (v *snapshotVerb) run(ctx context.Context) error {
	log, err := v.logs.logger()
	if err != nil {
		return err
	}
	nc, err := v.conn.connect("maf-sandbox engine snapshot", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := client.New(ctx, nc, client.WithPrefix(v.conn.prefix), client.WithLogger(log), client.WithCallTimeout(v.callTimeout))
	if err != nil {
		return err
	}
	spec, err := sandbox.NewSpec(v.kind, sandbox.WithImage(v.image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	if err != nil {
		return err
	}
	key := sandbox.Key{Scope: v.scope, ThreadID: v.thread, AgentID: v.agent}
	out, err := v.act(ctx, c, key, spec)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", v.action, err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// act does the action and returns what to print.
func (v *snapshotVerb) act(ctx context.Context, c *client.Backend, key sandbox.Key, spec sandbox.Spec) (any, error) {
	switch v.action {
	case "take", "pause":
		sb, err := c.Acquire(ctx, key, spec)
		if err != nil {
			return nil, err
		}
		if v.action == "pause" {
			return map[string]string{"paused": sb.InstanceID()}, sb.(sandbox.Pausable).Pause(ctx)
		}
		info, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
		return messages.SnapshotToWire(info), err
	case "list":
		list, err := c.Snapshots(ctx, v.scope, v.thread)
		out := []messages.APISnapshotInfo{}
		for _, s := range list {
			out = append(out, messages.SnapshotToWire(s))
		}
		return out, err
	case "restore":
		sb, err := c.Restore(ctx, key, spec, v.id)
		if err != nil {
			return nil, err
		}
		return map[string]string{"instance_id": sb.InstanceID(), "engine": sb.(*client.Sandbox).Engine()}, nil
	case "fork":
		var keys []sandbox.Key
		for _, a := range strings.Split(v.agents, ",") {
			keys = append(keys, sandbox.Key{Scope: v.scope, ThreadID: v.thread, AgentID: strings.TrimSpace(a)})
		}
		sbs, err := c.Fork(ctx, v.id, keys, spec)
		var out []map[string]string
		for i, sb := range sbs {
			out = append(out, map[string]string{"agent": keys[i].AgentID, "instance_id": sb.InstanceID(), "engine": sb.(*client.Sandbox).Engine()})
		}
		return out, err
	}
	return map[string]string{"deleted": v.id}, c.DeleteSnapshot(ctx, v.id)
}
