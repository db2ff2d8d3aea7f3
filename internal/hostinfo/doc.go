// Package hostinfo owns the host fingerprint stored with every run: kernel,
// CPU model and microcode, online CPUs, SMT state, cpufreq governor, memory,
// cgroup mode, whether the host itself is a virtual machine, and what
// shapes a real-time latency result: the preemption model, RT throttling,
// isolated and tickless CPUs, where interrupts may land and whether the
// kernel has its latency tracers.
//
// Every read goes through the proc, sys and boot roots of Options, and
// every file is parsed by a pure function (internal/procfs has those a
// remote machine's fingerprint shares), so the whole fingerprint can be
// tested on recorded fixture trees instead of on whatever host runs the
// tests. Only the uname fields and the cgroup filesystem type come from
// system calls.
package hostinfo
