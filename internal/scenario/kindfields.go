package scenario

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vfleet/vfleet/internal/guest"
)

// kindField reads one of a kind's own fields into the group's spec: the
// kind's declaration says what the value may be, the scenario only where
// a file or a CPU list is and whether this host has it.
func (p *parser) kindField(f guest.Field, s *Spec, dst *guest.Spec) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		text, ok := p.scalar(n, path)
		if !ok {
			return
		}
		switch {
		case f.Value.File:
			text = ""
			if p.file(n, path, s, &text, f.Value.Want, f.Value.MaxBytes); text == "" {
				return
			}
		case f.Value.CPUList:
			p.cpuList(n, path, text)
		}
		if err := f.Set(dst, text); err != nil {
			p.errorf(n, path, "%v", err)
		}
	}
}

// withoutMisplaced reports the keys of a group's mapping that are fields
// of other kinds than its own, saying which kinds take them, and returns
// the mapping without them: "unknown field" would send the reader looking
// for a typo that is not there.
func (p *parser) withoutMisplaced(item *yaml.Node, path, kind string) *yaml.Node {
	item = deref(item)
	if item.Kind != yaml.MappingNode || !slices.Contains(p.opts.KnownKinds, kind) {
		return item
	}
	own := map[string]bool{}
	for _, f := range guest.FieldsOf(kind) {
		own[f.Key] = true
	}
	kept := *item
	kept.Content = nil
	for i := 0; i+1 < len(item.Content); i += 2 {
		k := item.Content[i]
		if takers := guest.KindsTaking(k.Value); len(takers) > 0 && !own[k.Value] {
			p.errorf(k, joinPath(path, k.Value), "kind %s takes no %s (a field of kind %s)", kind, k.Value, strings.Join(takers, ", "))
			continue
		}
		kept.Content = append(kept.Content, k, item.Content[i+1])
	}
	return &kept
}

// mappingValue is the scalar a mapping gives key, "" when it gives none.
func mappingValue(n *yaml.Node, key string) string {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := deref(n.Content[i+1]); n.Content[i].Value == key && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}
