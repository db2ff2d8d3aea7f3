package image

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// ModuleDeps is a kernel's modules.dep: each module's path (relative to
// its /lib/modules/<version>) and the modules it needs.
type ModuleDeps map[string][]string

// ParseModulesDep reads a modules.dep file.
func ParseModulesDep(r io.Reader) (ModuleDeps, error) {
	deps := ModuleDeps{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		mod, needs, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("modules.dep: malformed line %q", line)
		}
		deps[mod] = strings.Fields(needs)
	}
	return deps, sc.Err()
}

// moduleName is a module path's name as modprobe spells it: dashes and
// underscores are the same.
func moduleName(p string) string {
	base := path.Base(p)
	base = base[:len(base)-len(path.Ext(base))]
	return strings.ReplaceAll(base, "-", "_")
}

// Present are those of names that are modules of this kernel.
func (d ModuleDeps) Present(names []string) []string {
	byName := map[string]bool{}
	for p := range d {
		byName[moduleName(p)] = true
	}
	var out []string
	for _, n := range names {
		if byName[strings.ReplaceAll(n, "-", "_")] {
			out = append(out, n)
		}
	}
	return out
}

// LoadOrder returns the paths of the named modules and of everything they
// need, each after its dependencies. A name found in builtin (the
// kernel's modules.builtin, by path) needs no loading and is skipped.
func (d ModuleDeps) LoadOrder(names []string, builtin map[string]bool) ([]string, error) {
	byName := map[string]string{}
	for p := range d {
		byName[moduleName(p)] = p
	}
	builtinNames := map[string]bool{}
	for p := range builtin {
		builtinNames[moduleName(p)] = true
	}
	var order []string
	done := map[string]bool{}
	var visit func(p string, depth int) error
	visit = func(p string, depth int) error {
		if done[p] {
			return nil
		}
		if depth > 64 {
			return fmt.Errorf("modules.dep: dependency loop at %s", p)
		}
		for _, dep := range d[p] {
			if err := visit(dep, depth+1); err != nil {
				return err
			}
		}
		done[p] = true
		order = append(order, p)
		return nil
	}
	for _, n := range names {
		n = strings.ReplaceAll(n, "-", "_")
		p, ok := byName[n]
		if !ok {
			if builtinNames[n] {
				continue
			}
			return nil, fmt.Errorf("kernel module %s is neither built in nor in modules.dep", n)
		}
		if err := visit(p, 0); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// ParseModulesBuiltin reads modules.builtin: one module path a line.
func ParseModulesBuiltin(r io.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out[l] = true
		}
	}
	return out, sc.Err()
}
