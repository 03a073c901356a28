package main

import (
	"flag"
	"fmt"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/sandbox"
)

// sleepFlags are serve's sleep settings (docs/operations.md, "Sleep"): off unless set; a
// spec's own sleep (its "sleep" field) wins over them.
type sleepFlags struct{ s sandbox.Sleep }

func (f *sleepFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.s.PauseAfter, "sleep-pause-after", envDuration("MAF_SANDBOX_SLEEP_PAUSE_AFTER", 0),
		"pause a sandbox nothing has called for this long (docker pause: its processes stay, frozen); the next call that needs it running wakes it; 0: never (env MAF_SANDBOX_SLEEP_PAUSE_AFTER)")
	fs.DurationVar(&f.s.StopAfter, "sleep-stop-after", envDuration("MAF_SANDBOX_SLEEP_STOP_AFTER", 0),
		"stop a sandbox nothing has called for this long (its files stay, its processes do not); its next acquire starts it again; 0: never (env MAF_SANDBOX_SLEEP_STOP_AFTER)")
}

// check refuses times that do not make a sleep.
func (f *sleepFlags) check() error {
	if err := f.s.Validate(); err != nil {
		return fmt.Errorf("--sleep-pause-after, --sleep-stop-after: %w", err)
	}
	return nil
}

// option is the backend option of the times asked for.
func (f *sleepFlags) option() actors.Option { return actors.WithSleep(f.s.PauseAfter, f.s.StopAfter) }
