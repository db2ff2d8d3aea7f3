package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// importedCLI is a CLI whose database holds the runs of the repository's
// own runs file: run 1 has values that are NaN and infinite, and figures
// that overflow.
func importedCLI(t *testing.T) *cli {
	t.Helper()
	c := newCLI(t)
	file, err := filepath.Abs("../../internal/archive/testdata/runs.vfr")
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := c.run("import", file); code != 0 {
		t.Fatalf("import: exit %d, %s", code, stderr)
	}
	return c
}

// Every format of report and compare renders every stored value, NaN and
// infinities included, and the JSON is JSON.
func TestEveryFormatRendersEveryStoredValue(t *testing.T) {
	c := importedCLI(t)
	var cmds [][]string
	for _, f := range []string{"table", "csv", "json", "html"} {
		cmds = append(cmds, []string{"report", "1", "--format", f})
	}
	for _, f := range []string{"table", "json", "html"} {
		cmds = append(cmds, []string{"compare", "1", "2", "--format", f}, []string{"compare", "2", "1", "--format", f})
	}
	for _, args := range cmds {
		stdout, stderr, code := c.run(args...)
		if code != 0 {
			t.Errorf("vfleet %q: exit %d, stderr %q", args, code, stderr)
			continue
		}
		if args[len(args)-1] == "json" && !json.Valid([]byte(stdout)) {
			t.Errorf("vfleet %q: not JSON:\n%s", args, stdout)
		}
	}
	stdout, _, _ := c.run("report", "1", "--format", "json")
	if !strings.Contains(stdout, `"non_finite": {`) {
		t.Errorf("the JSON report does not say what its nulls were:\n%s", stdout)
	}
}
