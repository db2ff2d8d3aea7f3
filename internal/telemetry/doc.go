// Package telemetry owns what vfleet tells people while it works: the
// progress display of long work (a redrawn status line on a terminal, plain
// log lines otherwise, so CI logs and pipes stay readable).
package telemetry
