// Package density measures what a fleet of guests costs the host: the
// memory (RSS and PSS) and CPU time of a set of processes and everything
// they started, and the disk space a directory really occupies.
//
// Every function reads /proc or the filesystem once, when it is called, and
// keeps nothing: a measurement over a window is two calls and a difference.
// Processes that exit while they are being read are left out rather than
// failing the measurement, since a fleet's processes come and go.
package density
