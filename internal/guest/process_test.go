package guest

import (
	"slices"
	"testing"
)

// An image's own variables replace vfleet's defaults of the same name and
// add to them; a malformed entry is dropped.
func TestProcessEnvTakesTheImagesVariables(t *testing.T) {
	got := Env{ImageEnv: []string{"PATH=/opt/app/bin:/usr/bin", "APP_MODE=bench", "broken"}}.ProcessEnv()
	want := []string{"PATH=/opt/app/bin:/usr/bin", "HOME=/root", "LC_ALL=C", "APP_MODE=bench"}
	if !slices.Equal(got, want) {
		t.Errorf("env = %q, want %q", got, want)
	}
	if got := (Env{}).ProcessEnv(); !slices.Equal(got, defaultEnv) {
		t.Errorf("vfleet's image: %q", got)
	}
}
