package guest

import (
	"context"
	"errors"
)

// WithCaches is implemented by a kind that keeps state of its own between
// runs under the state directory, which no run's ledger holds and so no
// run's clean-up removes (a VM's templates, booted once and saved for
// clones): `vfleet clean --templates` asks it to remove it.
type WithCaches interface {
	// RemoveCaches removes what the kind keeps under stateDir, waiting
	// for what is being made rather than cutting it short, and says what
	// it removed, each naming what it is ("VM template DIR").
	RemoveCaches(ctx context.Context, stateDir string) (removed []string, err error)
}

// RemoveCaches has every registered kind that keeps caches remove them
// and says what was removed; one kind's failure does not keep the others'
// from being removed.
func RemoveCaches(ctx context.Context, stateDir string) ([]string, error) {
	var out []string
	var errs []error
	for _, name := range KindNames() {
		regMu.RLock()
		k := kinds[name]
		regMu.RUnlock()
		if c, ok := k.(WithCaches); ok {
			removed, err := c.RemoveCaches(ctx, stateDir)
			out = append(out, removed...)
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
