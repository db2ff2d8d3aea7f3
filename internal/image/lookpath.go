package image

import (
	"os"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// guestPath is the PATH every guest kind gives the agent, and so every tool.
var guestPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// LookPath finds an executable program in a root file system as a guest
// started from it would: a name is searched along the guests' PATH, a
// path taken as it is. Links are resolved inside rootfs, never on the
// host: images link /bin to /usr/bin and tools to /etc/alternatives.
// It returns the program's path inside the guest.
func LookPath(rootfs, program string) (string, bool) {
	candidates := []string{program}
	if program == "" {
		return "", false
	}
	if program[0] != '/' {
		candidates = candidates[:0]
		for _, dir := range guestPath {
			candidates = append(candidates, dir+"/"+program)
		}
	}
	for _, c := range candidates {
		host, err := securejoin.SecureJoin(rootfs, c)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(host); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, true
		}
	}
	return "", false
}
