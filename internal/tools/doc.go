// Package tools is the one place vfleet finds the external programs it
// drives on the host, learns their versions, and knows which Debian package
// (or which upstream release, for what Debian does not ship) provides each,
// so every "missing" error can tell the user what to install.
package tools
