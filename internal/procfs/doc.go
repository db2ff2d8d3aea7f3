// Package procfs holds vfleet's parsers of the kernel's text files (/proc
// and /sys): /proc/PID/stat, /proc/stat, cpuinfo, meminfo, cpu lists,
// /proc/net/snmp and the socket tables. They are pure functions tested on
// recorded files, so the same code reads this host's files and bytes read
// over SSH from another machine (the remote peer's fingerprint) or from
// inside a guest (a VM's own /proc/stat, the network peer's sockets), and
// two readings of one machine always agree.
//
// It is also vfleet's one reader of /proc/PID/stat: Process names a
// process by its pid and start time, so that a pid the kernel has since
// given to another process is never taken for the one vfleet recorded.
//
// A process's own mount table (vfleet's on this host, the escape attempts'
// in a guest) is read from a proc root that tests point at a fixture
// tree, through
// github.com/prometheus/procfs, and its file system types, which that
// package does not read.
package procfs
