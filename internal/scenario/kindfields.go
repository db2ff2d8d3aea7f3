package scenario

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vfleet/vfleet/internal/guest"
)

// kindField reads one of a kind's own fields into the group's spec: the
// kind's declaration says what the value may be, the scenario only where
// a file or a CPU list is and whether this host has it. A field that
// spreads takes a list too, each value checked at its line.
func (p *parser) kindField(f guest.Field, s *Spec, g *GuestGroup) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if !f.Value.Spread || deref(n).Kind != yaml.SequenceNode {
			p.kindValue(f, s, &g.Spec, n, path)
			return
		}
		items := p.list(n, path, "values")
		var texts []string
		for i, item := range items {
			if text, ok := p.kindValue(f, s, &g.Spec, item, fmt.Sprintf("%s[%d]", path, i)); ok {
				texts = append(texts, text)
			}
		}
		if len(texts) == 0 || len(texts) < len(items) {
			return
		}
		// The group's spec is its first guest's.
		_ = f.Set(&g.Spec, texts[0])
		if g.Spread == nil {
			g.Spread = map[string][]string{}
		}
		g.Spread[f.Key] = texts
	}
}

// kindValue reads one value of a kind's field into dst.
func (p *parser) kindValue(f guest.Field, s *Spec, dst *guest.Spec, n *yaml.Node, path string) (string, bool) {
	text, ok := p.scalar(n, path)
	if !ok {
		return "", false
	}
	switch {
	case f.Value.File:
		text = ""
		if p.file(n, path, s, &text, f.Value.Want, f.Value.MaxBytes); text == "" {
			return "", false
		}
	case f.Value.CPUList:
		p.cpuList(n, path, text)
	}
	if err := f.Set(dst, text); err != nil {
		p.errorf(n, path, "%v", err)
		return "", false
	}
	return text, true
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
