package testutil

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Main runs a package's tests, then stops what they started for the whole
// test process (RequiresLibvirt's daemons): a package's TestMain calls it
// to share such fixtures among its tests.
func Main(m *testing.M) {
	processEnd.Lock()
	processEnd.main = true
	processEnd.Unlock()
	code := m.Run()
	processEnd.Lock()
	stops := processEnd.stops
	processEnd.stops = nil
	processEnd.Unlock()
	// The last started stops first, as t.Cleanup would have it.
	var err error
	if len(stops) > 0 {
		err = withMachine(func() error {
			var errs []error
			for i := len(stops) - 1; i >= 0; i-- {
				errs = append(errs, stops[i]())
			}
			return errors.Join(errs...)
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testutil:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

var processEnd struct {
	sync.Mutex
	main  bool
	stops []func() error
}

// atProcessEnd has Main run stop once the package's tests have run, and
// says whether it will: false where Main does not run them.
func atProcessEnd(stop func() error) bool {
	processEnd.Lock()
	defer processEnd.Unlock()
	if processEnd.main {
		processEnd.stops = append(processEnd.stops, stop)
	}
	return processEnd.main
}
