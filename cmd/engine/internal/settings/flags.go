package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ParseFlags parses args with fs, whose name is the verb ("run", "images build"). Help (-h)
// prints the verb's usage as fs.Usage says and returns [flag.ErrHelp]; any other mistake
// prints nothing and returns the flag package's error followed by one line pointing to the
// verb's -h, not the whole usage, which would bury the one line that matters.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return fmt.Errorf("%s: %w\n(run \"engine %s -h\" for its flags)", fs.Name(), err, fs.Name())
	}
	return nil
}
