package all

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
)

func TestMain(m *testing.M) { guesttest.Main(m) }

// TestGuestConformance is the suite every registered kind passes, on
// guests of its defaults or of its guest.Conformable spec, under each of
// its runtimes for a guest.Runtimed kind: a new kind gets
// all of it by registering itself in a package this one imports. A kind
// this host cannot run is skipped with its probe's reason, unless
// guesttest.RequiredKindsEnv names it.
func TestGuestConformance(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	img := testutil.Image(t)
	for _, name := range guest.KindNames() {
		t.Run(name, func(t *testing.T) {
			k, err := guest.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			o := guesttest.Options{Kind: k, RootFS: img.RootFS, AgentPath: img.AgentPath}
			if guest.TraitsOf(guest.Spec{Kind: name}).Elsewhere {
				o.Own = elsewhere(t, name)
			}
			r, ok := k.(guest.Runtimed)
			if !ok {
				guesttest.Run(t, o)
				return
			}
			// Each runtime the host's probe accepts; the others are
			// skipped with the probe's reason.
			for _, rt := range r.Runtimes() {
				t.Run(rt, func(t *testing.T) {
					o.Runtime = rt
					guesttest.Run(t, o)
				})
			}
		})
	}
}

// elsewhere are the fields that put the suite's guests of a kind that runs
// them elsewhere (guest.Traits.Elsewhere) into the test's fixture of that
// system.
func elsewhere(t *testing.T, kind string) guest.Own {
	switch kind {
	case "pod":
		kc := testutil.Kube(t)
		return guest.Own{}.With("kubeconfig", kc.Kubeconfig).With("pod_image", kc.AgentImage).With("image_pull", "never")
	}
	t.Fatalf("kind %s runs its guests elsewhere, and the suite has no fixture of where", kind)
	return nil
}

// TestEveryKindIsCovered fails for a package of the module that registers
// a guest kind which this package, and so the conformance suite and the
// vfleet command, do not compile in.
func TestEveryKindIsCovered(t *testing.T) {
	root := testutil.ModuleRoot(t)
	const module = "github.com/vfleet/vfleet"
	imported := importsOf(t, filepath.Join(root, "internal/guest/all/all.go"))
	if !importsOf(t, filepath.Join(root, "cmd/vfleet/builtins.go"))[module+"/internal/guest/all"] {
		t.Error("the vfleet command does not compile in package all: its kinds are not the tested ones")
	}
	registering := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && isGuestRegister(call.Fun) {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				registering[module+"/"+filepath.ToSlash(rel)] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(registering) == 0 {
		t.Fatal("found no package that registers a guest kind")
	}
	for pkg := range registering {
		if !imported[pkg] {
			t.Errorf("package %s registers a guest kind that package all does not import: no conformance test runs it", pkg)
		}
	}
}

func isGuestRegister(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Register" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "guest"
}

func importsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		out[p] = true
	}
	return out
}

// TestKindsBringTheirDoctorChecks: what a kind's guests need of the host
// is checked by doctor because the kind says so, not because doctor
// knows the kind.
func TestKindsBringTheirDoctorChecks(t *testing.T) {
	var names []string
	for _, name := range guest.KindNames() {
		k, _ := guest.Lookup(name)
		if c, ok := k.(doctor.Contributor); ok {
			for _, check := range c.DoctorChecks(doctor.Options{}) {
				names = append(names, check.Name)
			}
		}
	}
	for _, want := range []string{"runtime runc", "QEMU", "KVM", "TCG", "vhost-net"} {
		if !slices.Contains(names, want) {
			t.Errorf("no kind brings the %q check (checks: %v)", want, names)
		}
	}
}

// TestKindsProgramsAreRegisteredTools: the host program each kind's
// guests run, under each of its runtimes and for each architecture, is a
// tool internal/tools knows (registered by the kind's own package, or in
// the tools every package shares), so that a run records its version and
// doctor says how to install it.
func TestKindsProgramsAreRegisteredTools(t *testing.T) {
	for _, name := range guest.KindNames() {
		k, _ := guest.Lookup(name)
		runtimes := []string{""}
		if r, ok := k.(guest.Runtimed); ok {
			runtimes = append(runtimes, r.Runtimes()...)
		}
		for _, rt := range runtimes {
			for _, arch := range append([]string{""}, guest.Arches...) {
				p := guest.ProgramOf(guest.Spec{Kind: name, Runtime: rt, Arch: arch})
				if _, err := tools.Lookup(p); p != "" && err != nil {
					t.Errorf("kind %s, runtime %q, arch %q: %v", name, rt, arch, err)
				}
			}
		}
	}
}
