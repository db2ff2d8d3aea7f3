package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Lookup returns the text of the built-in scenario name.
func Lookup(name string) ([]byte, error) {
	if strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("built-in scenario %q: %w", name, fs.ErrNotExist)
	}
	return files.ReadFile(name + ".yaml")
}

// Names lists the built-in scenarios.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}
