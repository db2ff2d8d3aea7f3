// Package procfs is vfleet's one reader of /proc/PID/stat: the parser is a
// pure function tested on recorded files, and Process names a process by
// its pid and start time, so that a pid the kernel has since given to
// another process is never taken for the one vfleet recorded.
package procfs
