// Package scenarios holds the built-in scenario files, embedded into the
// vfleet binary so `vfleet run NAME` works from anywhere. It only serves
// their text; internal/scenario parses and validates them, and its tests
// check that every file here parses.
package scenarios
