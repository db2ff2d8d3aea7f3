// Package hostinfo owns the host fingerprint stored with every run: kernel,
// CPU model and microcode, online CPUs, SMT state, cpufreq governor, memory,
// cgroup mode and whether the host itself is a virtual machine.
//
// Every read goes through the proc and sys roots of Options, and every file
// is parsed by a pure function, so the whole fingerprint can be tested on
// recorded fixture trees instead of on whatever host runs the tests. Only
// the uname fields and the cgroup filesystem type come from system calls.
package hostinfo
