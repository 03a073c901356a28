package actors

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// removeRequest asks to remove Path (recursively when Recursive).
type removeRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
	Recursive  bool
}

// removeResponse says whether the removal landed.
type removeResponse struct {
	Err error
}

func (*removeRequest) needsFreeze() bool  { return false }
func (*removeRequest) fail(err error) any { return &removeResponse{Err: err} }

func (m *removeRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	reply(&removeResponse{Err: a.vanished(m.InstanceID, a.remove(ctx, m))})
}

// reclaimRequest asks to remove the framework-created directory Dir within Timeout.
type reclaimRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Dir        string
	WorkDir    string
	Timeout    time.Duration
}

// reclaimResponse says whether the reclaim landed.
type reclaimResponse struct {
	Err error
}

func (*reclaimRequest) needsFreeze() bool  { return false }
func (*reclaimRequest) fail(err error) any { return &reclaimResponse{Err: err} }

func (m *reclaimRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	reply(&reclaimResponse{Err: a.vanished(m.InstanceID, a.reclaim(ctx, m))})
}

// Every removal the engine makes inside a guest — Remove, Reclaim, and any framework cleanup —
// goes through removeGuarded, the one place the reach rule (protocol §6.5) is applied: a
// removal must not delete anything the guest program could not have deleted itself.
//
// rm resolves every component of its operand but the last, so a link the guest plants at any
// depth below the base would carry a removal out of it. The guard therefore walks every
// component from "/" down to the operand's parent, no-follow, on each call (never on an
// answer remembered from the acquire): a link is refused as not confined, and the removal
// runs as root only when every component is root's and written by nobody else — then the
// guest can swap none of them between the walk and rm. Otherwise it runs with the guest's
// own identity, which satisfies the rule whatever the guest does meanwhile.
//
// A recursive removal of a directory always runs as the guest: rm -rf descends by name, so a
// guest-writable directory anywhere inside the tree could be swapped for a link mid-descent,
// and the walk cannot see inside the tree. The framework's own files and directories belong
// to the guest identity, so the guest can always remove them.

// removal is one request to delete a guest path.
type removal struct {
	op        string        // "remove" or "reclaim", for messages
	shown     string        // the path as the caller gave it, for messages
	abs       string        // the string-confined absolute guest path
	wd        string        // the resolved working directory the walk starts below
	recursive bool          // rm -rf rather than rm -f
	timeout   time.Duration // the whole removal's bound
	// guestFirst runs rm as the guest before any walk, and walks only when the guest was
	// refused: for a name the engine made itself and expects the guest to own (a write's
	// staging name), the common case is then one exec.
	guestFirst bool
}

// argv is the rm command line of r.
func (r removal) argv() []string {
	if r.recursive {
		return []string{"rm", "-rf", "--", r.abs}
	}
	return []string{"rm", "-f", "--", r.abs}
}

// failed is r's refusal after rm exited non-zero.
func (r removal) failed(out removalOutcome) error {
	return &sandbox.PathError{Op: r.op, Path: r.shown, Err: fmt.Errorf("could not %s %s: rm exited %d%s", r.op, r.shown, out.code, out.detail)}
}

// remove deletes one path (protocol §4.7): the string check, then the guarded removal.
func (a *containerActor) remove(ctx context.Context, m *removeRequest) error {
	target, abs, wd, err := a.locate(m.InstanceID, m.Path, m.WorkDir, "remove")
	if err != nil {
		return err
	}
	return a.removeGuarded(ctx, target, removal{op: "remove", shown: m.Path, abs: abs, wd: wd, recursive: m.Recursive, timeout: a.b.commandTimeout()})
}

// reclaim removes a framework-created directory below the working directory (protocol §4.9).
func (a *containerActor) reclaim(ctx context.Context, m *reclaimRequest) error {
	target, err := a.target(m.InstanceID)
	if err != nil {
		return err
	}
	if m.Timeout <= 0 {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("reclaim timeout must be positive, got %s", m.Timeout)}
	}
	wd := paths.Normalize(a.workingDir(m.WorkDir))
	dir, err := paths.ResolveReclaim(m.Dir, wd)
	if err != nil {
		return err
	}
	return a.removeGuarded(ctx, target, removal{op: "reclaim", shown: dir, abs: dir, wd: wd, recursive: true, timeout: m.Timeout})
}

// removeGuarded walks, decides the authority by the reach rule, and runs rm from "/" (the
// operand's parent may be absent). An absent component anywhere on the way is success with
// no exec: nothing below it exists.
func (a *containerActor) removeGuarded(ctx context.Context, target string, r removal) error {
	return a.onPlane(ctx, r.op, target, func(ctx context.Context, p filePlane) error {
		return p.remove(ctx, target, r)
	})
}

// archiveRemove is removeGuarded on the archive plane: the walk by archive stats, rm by exec.
func (a *containerActor) archiveRemove(ctx context.Context, target string, r removal) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var asGuest *removalOutcome
	if r.guestFirst {
		out, err := a.runRemoval(ctx, target, r.argv(), false)
		if err != nil || out.code == 0 {
			return err
		}
		asGuest = &out // refused: only root may do more, where the walk allows it
	}
	// A guest that is root reaches what root reaches: its removal runs as itself whatever the
	// owners, so its walk decides on kinds alone, with the driver's cheaper stat.
	guestIsRoot := a.facts != nil && a.facts.resolved && a.facts.uid == 0
	w, err := a.removalWalk(ctx, target, r, guestIsRoot)
	if err != nil || w == nil {
		return err // nil, nil: a component or the operand is absent, nothing to remove
	}
	raise := !guestIsRoot && w.rootOK && paths.HostOwned(w.owners, false) && !(r.recursive && w.operand.Type == docker.EntryDir)
	if asGuest != nil && !raise {
		return r.failed(*asGuest)
	}
	out, err := a.runRemoval(ctx, target, r.argv(), raise)
	if err != nil {
		return err
	}
	if out.code != 0 {
		return r.failed(out)
	}
	return nil
}

// removalWalked is what the archive plane's walk before a removal found: the owners from "/"
// down to the operand's parent, whether "/" itself was read, and the operand.
type removalWalked struct {
	owners  []paths.Owner
	rootOK  bool
	operand *docker.Entry
}

// removalWalk stats every component from "/" to r's operand, refusing a link on the way. It
// returns nil, nil when a component or the operand is absent: nothing there to remove.
func (a *containerActor) removalWalk(ctx context.Context, target string, r removal, guestIsRoot bool) (*removalWalked, error) {
	parent := path.Dir(r.abs)
	walked := paths.Ancestors(parent, r.wd)
	memo := newStatMemo()
	if guestIsRoot {
		memo = newKindMemo()
	}
	memo.prefetch(ctx, a.b.engine, target, append([]string{"/", r.abs}, walked...))

	var owners []paths.Owner
	record := func(abs string, e *docker.Entry) {
		owners = append(owners, paths.Owner{Path: abs, UID: e.UID, Mode: e.Mode})
	}
	rootOK := false
	if e, err := memo.stat(ctx, a.b.engine, target, "/"); err == nil && e != nil {
		record("/", e)
		rootOK = true
	} else {
		a.log.Debug("stat / before removal", zap.Error(err))
	}
	before := len(owners)
	if err := paths.RefuseSymlinkedAncestors(ctx, a.guestStat(target, memo, record), r.abs, r.wd, false); err != nil {
		return nil, asTimeout(ctx, r, err)
	}
	if len(owners)-before != len(walked) {
		return nil, nil // a component is missing: nothing below it to remove
	}
	operand, err := memo.stat(ctx, a.b.engine, target, r.abs)
	if err != nil {
		return nil, asTimeout(ctx, r, fmt.Errorf("docker could not stat %s: %w", r.abs, err))
	}
	if operand == nil {
		return nil, nil // absent is success (rm -f), and two removals in a row both succeed
	}
	return &removalWalked{owners: owners, rootOK: rootOK, operand: operand}, nil
}

// asTimeout reports a walk cut short by the removal's own bound as the removal's timeout.
func asTimeout(ctx context.Context, r removal, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return &sandbox.TimeoutError{Op: r.op, Timeout: r.timeout}
	}
	return err
}

type removalOutcome struct {
	code   int
	detail string // " — stderr", with the root attempt's stderr when both ran
}

// runRemoval runs rm from "/" as root when raise, falling back once to the guest when root
// was refused in a container without capabilities; otherwise as the guest. A timeout
// discards the container, as for any exec.
func (a *containerActor) runRemoval(ctx context.Context, target string, argv []string, raise bool) (removalOutcome, error) {
	run := func(user string) (docker.ExecOutput, error) {
		out, err := a.b.engine.Exec(ctx, docker.ExecRequest{Target: target, User: user, WorkDir: "/", Argv: argv, MaxOutputBytes: 64 << 10})
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			a.removeContainer(target)
			return out, &sandbox.TimeoutError{Op: strings.Join(argv[:2], " ")}
		}
		return out, notStarted(err, argv[0], "/")
	}
	user := ""
	if raise {
		user = "0"
	}
	a.log.Debug("removal", zap.Strings("argv", argv), zap.Bool("as_root", raise))
	out, err := run(user)
	if err != nil {
		return removalOutcome{}, fmt.Errorf("run %s: %w", argv[0], err)
	}
	rootStderr := ""
	if raise && out.ExitCode != 0 && a.facts != nil && a.facts.capsDropped {
		rootStderr = strings.TrimSpace(string(out.Stderr))
		if out, err = run(""); err != nil {
			return removalOutcome{}, fmt.Errorf("run %s: %w", argv[0], err)
		}
	}
	res := removalOutcome{code: out.ExitCode}
	if s := strings.TrimSpace(sandbox.DecodeReplace(out.Stderr)); s != "" {
		res.detail = " — " + s
	}
	if rootStderr != "" && res.code != 0 {
		res.detail += " (as root: " + rootStderr + ")"
	}
	return res, nil
}

// notStarted types a driver's report that the runtime could not start a program an operation
// runs for its own work ([docker.ExecStartError]) as [*sandbox.ProcessNotStartedError]; any
// other error passes. (An Exec's own command answers a result instead: finishExec.)
func notStarted(err error, program, wd string) error {
	var se *docker.ExecStartError
	if !errors.As(err, &se) {
		return err
	}
	return &sandbox.ProcessNotStartedError{Program: program, WorkDir: wd, Cause: se.Cause, Message: se.Message}
}
