// Package scenario owns the scenario file: its YAML format, defaults,
// validation and expansion into a Plan of guests and ordered steps.
//
// Parsing goes through yaml.v3's node tree so that every problem can be
// reported with FILE:LINE:COL, the field's path and what is allowed, and all
// problems of a file are reported together. A Spec is plain data; nothing
// here touches the host.
package scenario
