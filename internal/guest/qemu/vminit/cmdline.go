package vminit

import "strings"

// Kernel command line parameters vfleet passes to the guest's init. They
// carry a dot so the kernel keeps them out of init's environment and
// argument list (it takes dotted names for module parameters) and they are
// read back from /proc/cmdline.
const (
	ParamHostname = "vfleet.hostname"
	// ParamPort names the virtio-serial port the agent serves on.
	ParamPort = "vfleet.port"
	// ParamPrefix starts every parameter of vfleet's own; a user's command
	// line may not use it.
	ParamPrefix = "vfleet."
)

// ConfigPath marks an initramfs built by vfleet and tells its first stage
// what to do; its absence means init runs from the real root already.
const ConfigPath = "/vfleet-initramfs.json"

// Config is the content of ConfigPath, written when the initramfs is built.
type Config struct {
	// Modules are paths inside the initramfs, in an order that loads every
	// module after the modules it depends on.
	Modules []string `json:"modules"`
	// Init is the program, in the real root, that stage 1 hands over to.
	Init string `json:"init"`
}

// ParseCmdline splits a kernel command line into its key=value
// parameters; flags without a value map to "". Everything after a lone
// "--" belongs to init and is left out.
func ParseCmdline(s string) map[string]string {
	out := map[string]string{}
	for _, w := range SplitCmdline(s) {
		if w == "--" {
			break
		}
		k, v, _ := strings.Cut(w, "=")
		out[k] = v
	}
	return out
}

// SplitCmdline splits a kernel command line into its words. Double quotes
// group a value with spaces, as the kernel's own parser allows, and are
// dropped.
func SplitCmdline(s string) []string {
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			inWord = true
		case (r == ' ' || r == '\t' || r == '\n') && !inQuote:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// InitArgs returns init's own arguments from its argv (without argv[0]).
// The kernel hands init every command line word it does not know, ahead
// of the words after "--"; they would stop flag parsing at the first one.
func InitArgs(args []string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			return args[i:]
		}
	}
	return nil
}
