package scenario

import (
	"strings"
	"testing"
)

// Every built-in scenario says what it measures, for `vfleet scenarios`.
func TestBuiltinsAreDescribed(t *testing.T) {
	builtins, err := Builtins()
	if err != nil || len(builtins) == 0 {
		t.Fatalf("Builtins() = %v, %v", builtins, err)
	}
	for _, b := range builtins {
		if b.Description == "" || strings.ContainsAny(b.Description, "\n\t") {
			t.Errorf("%s: description %q, want one line", b.Name, b.Description)
		}
	}
}
