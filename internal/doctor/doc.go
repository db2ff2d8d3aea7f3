// Package doctor answers "what can this host do, and what is missing?":
// a list of independent checks, each run with its own time limit, each
// result naming how to fix what is missing. Checks probe, rather than
// trust: a runtime must really start a container and an accelerator must
// really boot a kernel, because a binary or a /dev/kvm node can exist and
// still not work.
package doctor
