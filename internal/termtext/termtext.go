// Package termtext makes text that came from outside vfleet (a runs file,
// another machine, a tool's output, a stored run) safe to print on a
// terminal: a run's key or origin holding an escape sequence must not
// clear the screen, retitle the window or forge lines of output.
package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Safe returns s with every control character written as an escape, as
// strconv.Quote writes it (\n, \t, \x1b, \u0085): the C0 controls, DEL
// and the C1 controls, the bidirectional overrides and isolates, which
// reorder what is shown, and bytes that are not UTF-8. Everything else,
// ordinary Unicode included, is left as it is; s is returned itself when
// nothing needs escaping.
func Safe(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafe(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafe(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafe says whether r is a control a terminal acts on, or one that
// changes the order text is shown in.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
