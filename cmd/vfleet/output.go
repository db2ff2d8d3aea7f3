package main

import (
	"io"
	"os"
)

// writeOutput hands write the file output names, or standard output for
// "" and "-". A file is closed before writeOutput returns and its error
// returned: a full disk shows up at close, and a page cut short must not
// be taken as written.
func writeOutput(output string, write func(io.Writer) error) error {
	if output == "" || output == "-" {
		return write(os.Stdout)
	}
	file, err := os.Create(output)
	if err != nil {
		return err
	}
	if err := write(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}
