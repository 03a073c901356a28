package actors

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// facts are what acquire learns about an instance before handing it out.
type facts struct {
	uid, gid    int
	resolved    bool // the guest identity is known; otherwise files are stamped root's
	capsDropped bool
}

// accountFileLimit bounds the reads of /etc/passwd and /etc/group.
const accountFileLimit = 64 << 10

// learnFacts computes the facts of the instance, caching them per (image, base) only when the
// identity resolved, so an unresolved one is tried again on the next acquire. A container this
// acquire created has its image's files, so its identity is the image's (image_facts.go).
func (a *containerActor) learnFacts(ctx context.Context, info *docker.ContainerInfo, imageRef, workDir string, created bool) (*facts, error) {
	key := info.ID + "|" + imageRef + "|" + workDir
	if a.facts != nil && a.factsKey == key {
		return a.facts, nil
	}
	f := &facts{capsDropped: capsDropped(info)}
	known, cached := facts{}, false
	if created {
		known, cached = a.b.images.identity(info.ImageID, info.User)
	}
	uid, gid, ok := known.uid, known.gid, known.resolved
	if !cached {
		var err error
		if uid, gid, ok, err = a.resolveIdentity(ctx, info); err != nil {
			return nil, err
		}
	}
	f.uid, f.gid, f.resolved = uid, gid, ok
	if created && !cached {
		a.b.images.setIdentity(info.ImageID, info.User, *f)
	}
	if ok {
		a.facts, a.factsKey = f, key
	} else {
		a.log.Warn("guest identity unresolved: files_out and host_tools workloads are refused, others get root-owned inputs; "+
			"give the image a numeric uid:gid user, readable /etc/passwd and /etc/group, or a working id", zap.String("user", info.User))
	}
	return f, nil
}

func capsDropped(info *docker.ContainerInfo) bool {
	for _, c := range info.CapDrop {
		if strings.EqualFold(c, "ALL") {
			return true
		}
	}
	return false
}

// resolveIdentity finds the guest's uid and gid: Config.User, then /etc/passwd and /etc/group
// read through the tar plane, then id run as the guest. ok is false when the uid stays
// unknown; an exec timeout propagates (it has discarded the container).
func (a *containerActor) resolveIdentity(ctx context.Context, info *docker.ContainerInfo) (uid, gid int, ok bool, err error) {
	user := strings.TrimSpace(info.User)
	if user == "" || user == "0:0" {
		return 0, 0, true, nil
	}
	u := parseUser(user)
	if u.uid < 0 || (u.gid < 0 && u.groupName == "") {
		if data := a.accountFile(ctx, info.ID, "/etc/passwd"); data != nil {
			u.uid, u.gid = fromPasswd(data, u.userName, u.uid, u.gid, u.groupName != "")
		}
	}
	if u.gid < 0 && u.groupName != "" {
		if data := a.accountFile(ctx, info.ID, "/etc/group"); data != nil {
			u.gid = fromGroup(data, u.groupName)
		}
	}
	if err := a.askID(ctx, info.ID, &u); err != nil {
		return 0, 0, false, err
	}
	switch {
	case u.uid >= 0 && u.gid >= 0:
		return u.uid, u.gid, true, nil
	case u.uid >= 0:
		return u.uid, 0, true, nil
	}
	return 0, 0, false, nil
}

// guestUser is Config.User taken apart: numeric halves are known ids (-1 unknown), named
// halves are looked up.
type guestUser struct {
	uid, gid            int
	userName, groupName string
}

// parseUser splits "user[:group]"; an empty user half is root.
func parseUser(user string) guestUser {
	userHalf, groupHalf, _ := strings.Cut(user, ":")
	u := guestUser{uid: -1, gid: -1}
	switch {
	case userHalf == "":
		u.uid = 0
	case isDigits(userHalf):
		u.uid, _ = strconv.Atoi(userHalf)
	default:
		u.userName = userHalf
	}
	switch {
	case isDigits(groupHalf):
		u.gid, _ = strconv.Atoi(groupHalf)
	case groupHalf != "":
		u.groupName = groupHalf
	}
	return u
}

// askID fills what the account files left unknown of a named user by running id as the
// guest. Only an exec timeout is an error.
func (a *containerActor) askID(ctx context.Context, target string, u *guestUser) error {
	if u.userName == "" || (u.uid >= 0 && u.gid >= 0) {
		return nil
	}
	var err error
	if u.uid < 0 {
		if u.uid, err = a.idOf(ctx, target, "-u"); err != nil {
			return err
		}
	}
	if u.gid < 0 && u.groupName == "" {
		if u.gid, err = a.idOf(ctx, target, "-g"); err != nil {
			return err
		}
	}
	return nil
}

// accountFile reads a complete regular account file, or nil: unreadable files are no error.
func (a *containerActor) accountFile(ctx context.Context, target, file string) []byte {
	e, body, err := a.b.engine.Read(ctx, target, file, accountFileLimit)
	if err != nil || e == nil || e.Type != docker.EntryFile {
		return nil
	}
	return body
}

func fromPasswd(data []byte, name string, uid, gid int, namedGroup bool) (int, int) {
	var lines [][]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 4 && isDigits(f[2]) && isDigits(f[3]) {
			lines = append(lines, f)
		}
	}
	if uid < 0 && name != "" {
		for _, f := range lines {
			if f[0] == name {
				uid, _ = strconv.Atoi(f[2])
				break
			}
		}
	}
	if uid >= 0 && gid < 0 && !namedGroup {
		for _, f := range lines {
			if f[2] == strconv.Itoa(uid) {
				gid, _ = strconv.Atoi(f[3])
				break
			}
		}
	}
	return uid, gid
}

func fromGroup(data []byte, name string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name && isDigits(f[2]) {
			n, _ := strconv.Atoi(f[2])
			return n
		}
	}
	return -1
}

// idOf runs `id <flag>` as the guest; a non-numeric answer leaves the value unknown.
func (a *containerActor) idOf(ctx context.Context, target, flag string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, a.b.commandTimeout())
	defer cancel()
	out, err := a.b.engine.Exec(ctx, docker.ExecRequest{Target: target, WorkDir: "/", Argv: []string{"id", flag}, MaxOutputBytes: 1024})
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			a.removeContainer(target)
			return -1, &sandbox.TimeoutError{Op: "id " + flag, Timeout: a.b.commandTimeout()}
		}
		return -1, nil
	}
	s := strings.TrimSpace(string(out.Stdout))
	if out.ExitCode != 0 || !isDigits(s) {
		return -1, nil
	}
	n, _ := strconv.Atoi(s)
	return n, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// probe is one check of the image command contract.
type probe struct {
	name  string
	caps  []sandbox.Capability
	argv  []string
	needs func(sandbox.CapabilitySet) bool
}

func probes() []probe {
	p := "/.maf-command-probe-" + randomHex()
	hostTools := "mkdir -p / || exit 11; mv -f " + p + " " + p + "-to >/dev/null 2>&1; [ $? -eq 1 ] || exit 12; " +
		"nohup sh -c 'exit 0' </dev/null >/dev/null 2>&1 || exit 13"
	return []probe{
		{name: "sh", caps: []sandbox.Capability{sandbox.Exec}, argv: []string{"sh", "-c", "exit 0"},
			needs: func(c sandbox.CapabilitySet) bool { return c.Has(sandbox.Exec) && !c.Has(sandbox.HostTools) }},
		{name: "host-tools", caps: []sandbox.Capability{sandbox.Exec, sandbox.HostTools}, argv: []string{"sh", "-c", hostTools},
			needs: func(c sandbox.CapabilitySet) bool { return c.Has(sandbox.HostTools) }},
		{name: "rm", caps: []sandbox.Capability{sandbox.FilesDelete}, argv: []string{"rm", "-rf", "--"},
			needs: func(c sandbox.CapabilitySet) bool { return c.Has(sandbox.FilesDelete) }},
	}
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runProbes checks the image commands the spec's capabilities need, caching successes per
// instance, and per image ID for the containers acquire creates (image_facts.go): a fresh
// container of an image that passed a probe skips it. A failure is tried again on the next
// acquire and never removes the container.
func (a *containerActor) runProbes(ctx context.Context, info *docker.ContainerInfo, spec sandbox.Spec, imageRef string, created bool) error {
	target := info.ID
	if a.probedID != target {
		a.probedID, a.probed = target, map[string]bool{}
		if created {
			a.probed = a.b.images.probed(info.ImageID)
		}
	}
	deadline := min(10*time.Second, a.b.commandTimeout())
	pctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	req := spec.RequiredCapabilities()
	var due []probe
	for _, p := range probes() {
		if p.needs(req) && !a.probed[p.name] {
			due = append(due, p)
		}
	}
	// The probes change nothing in the guest, so they run at once.
	outs := make([]docker.ExecOutput, len(due))
	errs := make([]error, len(due))
	var wg sync.WaitGroup
	for i, p := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = a.execRetrying(pctx, docker.ExecRequest{Target: target, WorkDir: "/", Argv: p.argv, MaxOutputBytes: 1024})
		}()
	}
	wg.Wait()
	for i, p := range due {
		var se *docker.ExecStartError
		switch {
		case errors.As(errs[i], &se):
			return &sandbox.CapabilityNotSupportedError{Backend: BackendName, Missing: p.caps, Kind: spec.Kind,
				Declared: a.b.Declarations().Capabilities,
				Reason: fmt.Sprintf("image %s could not start the %s probe (%s%s); supply an image with working commands; the next acquire retries unsuccessful checks",
					imageRef, p.name, se.Message, a.stoppedSince(ctx))}
		case errs[i] != nil && ctx.Err() != nil:
			return fmt.Errorf("run the %s probe: %w", p.name, ctx.Err())
		case errs[i] != nil:
			// The probe could not run (a busy or unreachable daemon, a pause by another party):
			// that says nothing of the image, so it is no capability refusal.
			return &sandbox.BackendUnavailableError{Backend: BackendName, Err: errs[i], Reason: fmt.Sprintf(
				"the %s probe got no answer from the Docker daemon within %s (busy or unreachable); nothing is known of the image, retry the acquire",
				p.name, deadline)}
		}
		if outs[i].ExitCode != 0 {
			return &sandbox.CapabilityNotSupportedError{Backend: BackendName, Missing: p.caps, Kind: spec.Kind,
				Declared: a.b.Declarations().Capabilities,
				Reason: fmt.Sprintf("image %s failed the %s probe with status %d (expected 0); supply an image with working commands; the next acquire retries unsuccessful checks",
					imageRef, p.name, outs[i].ExitCode)}
		}
		a.probed[p.name] = true
		if p.name == "host-tools" {
			a.probed["sh"] = true
		}
		if created {
			a.b.images.setProbed(info.ImageID, p.name)
		}
	}
	return nil
}

// stoppedSince says, for a probe the runtime could not start, whether the container had
// stopped meanwhile and how its first process ended ("" when it runs, or cannot be read): a
// refusal that blames the image must show when the container itself was gone.
func (a *containerActor) stoppedSince(ctx context.Context) string {
	info, err := a.refresh(ctx)
	if err != nil || info == nil || info.Running {
		return ""
	}
	return fmt.Sprintf("; the container had stopped: status %s, exit code %d", info.Status, info.ExitCode)
}

// execRetrying runs a host-side command (probe, id) inside the actor. The actor holds no
// freeze while it runs, so a frozen refusal here is someone else's: it is returned.
func (a *containerActor) execRetrying(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
	out, err := a.b.engine.Exec(ctx, req)
	if errors.Is(err, docker.ErrPaused) {
		return out, fmt.Errorf("container is paused by another party: %w", err)
	}
	return out, err
}
