package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// readmeElsewhere are the flags the README's command table leaves out
// on purpose: the global settings, each in the table of where things live
// below it, as "`--flag`".
var readmeElsewhere = map[string]string{
	"vfleet --agent":     "`--agent`",
	"vfleet --db":        "`--db`",
	"vfleet --state-dir": "`--state-dir`",
}

// readmeCommandRows reads the README and the first cells of its command
// table, backticks and all.
func readmeCommandRows(t *testing.T) (readme string, rows []string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n| command | what it does |\n|---|---|\n")
	if !ok {
		t.Fatal("README.md has no command table")
	}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		// A | inside a cell is escaped as \|.
		cell, _, _ := strings.Cut(strings.ReplaceAll(line[2:], `\|`, "¦"), " | ")
		rows = append(rows, cell)
	}
	return string(b), rows
}

// The README's command table names every command the CLI has and, in a
// row of that command, each of its flags, so that it cannot fall behind
// the CLI again.
func TestReadmeCommandTableCoversTheCLI(t *testing.T) {
	readme, rows := readmeCommandRows(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		path := c.CommandPath()
		// A row is the command's when its first cell starts with the
		// command, followed by an argument, a flag or the cell's end.
		of := regexp.MustCompile("^`" + regexp.QuoteMeta(path) + "[ `]")
		var own []string
		for _, r := range rows {
			if of.MatchString(r) {
				own = append(own, r)
			}
		}
		if len(own) == 0 && !c.HasSubCommands() && readmeElsewhere[path] == "" {
			t.Errorf("README's command table has no row for %q", path)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" || readmeElsewhere[path+" --"+f.Name] != "" {
				return
			}
			mention := regexp.MustCompile(`(^|[\s\[(|])--` + regexp.QuoteMeta(f.Name) + `\b`)
			short := f.Shorthand != "" && strings.Contains(strings.Join(own, " "), "-"+f.Shorthand+" ")
			for _, r := range own {
				if mention.MatchString(r) || short {
					return
				}
			}
			t.Errorf("README's command table does not mention %s --%s in a row of %q", path, f.Name, path)
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCommand())
	for flag, mention := range readmeElsewhere {
		if !strings.Contains(readme, mention) {
			t.Errorf("README.md does not mention %s anywhere (as %s)", flag, mention)
		}
	}
}
