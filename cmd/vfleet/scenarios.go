package main

import (
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/scenario"
)

func newScenariosCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "scenarios",
		Short: "List the built-in scenarios, each with what it measures",
		Long: `List the built-in scenarios that 'vfleet run NAME' and 'vfleet audit NAME' take, one a
line: its name, then its description.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			builtins, err := scenario.Builtins()
			if err != nil {
				return err
			}
			width := 0
			for _, b := range builtins {
				width = max(width, utf8.RuneCountInString(b.Name))
			}
			var out strings.Builder
			for _, b := range builtins {
				fmt.Fprintf(&out, "%-*s  %s\n", width, b.Name, b.Description)
			}
			_, err = os.Stdout.WriteString(out.String())
			return err
		},
	}
}
