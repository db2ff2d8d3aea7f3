package scenario

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vfleet/vfleet/scenarios"
)

// Builtin is a built-in scenario and what it measures.
type Builtin struct {
	Name        string
	Description string // one line
}

// Builtins lists the built-in scenarios with their descriptions, each
// folded onto one line, without validating them (Load does, for a run).
func Builtins() ([]Builtin, error) {
	var out []Builtin
	for _, name := range scenarios.Names() {
		data, err := scenarios.Lookup(name)
		if err != nil {
			return nil, err
		}
		var head struct {
			Description string `yaml:"description"`
		}
		if err := yaml.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("built-in scenario %s: %w", name, err)
		}
		out = append(out, Builtin{Name: name, Description: strings.Join(strings.Fields(head.Description), " ")})
	}
	return out, nil
}
