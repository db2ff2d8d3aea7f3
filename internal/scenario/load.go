package scenario

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/vfleet/vfleet/internal/workload"
	"github.com/vfleet/vfleet/scenarios"
)

// Load reads a scenario by reference: a path to a YAML file, or the name of
// a built-in scenario. An existing file wins over a built-in of that name.
func Load(ref string, opts Options) (*Spec, error) {
	data, err := readFile(ref)
	if err == nil {
		return Parse(ref, data, opts)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, clippedError{err}
	}
	data, err = scenarios.Lookup(ref)
	if err != nil {
		// Wrapping fs.ErrNotExist lets the CLI tell "nothing there" from a
		// file it could not read.
		// The built-ins are too many to list in a line: a likely typo is
		// named, the rest is a command away.
		hint := "'vfleet scenarios' lists the built-ins"
		if s := suggest(ref, scenarios.Names()); s != "" {
			hint = fmt.Sprintf("did you mean %q? %s", s, hint)
		}
		return nil, fmt.Errorf("scenario %q: no such file, and no built-in scenario of that name (%s): %w",
			workload.Clip(ref), hint, fs.ErrNotExist)
	}
	return Parse("builtin:"+ref, data, opts)
}
