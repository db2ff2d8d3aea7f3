package scenarios

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
)

func TestDefaultIsBuiltIn(t *testing.T) {
	if !slices.Contains(Names(), "default") {
		t.Fatalf("Names() = %v, want default among them", Names())
	}
	data, err := Lookup("default")
	if err != nil || len(data) == 0 {
		t.Fatalf("Lookup(default) = %d bytes, %v", len(data), err)
	}
}

func TestLookupRefusesWhatIsNotAName(t *testing.T) {
	for _, name := range []string{"nope", "default.yaml", "../go.mod", "", "."} {
		if _, err := Lookup(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Lookup(%q) = %v, want fs.ErrNotExist", name, err)
		}
	}
}
