package termtext

import "testing"

func TestSafeEscapesControlsAndLeavesTextAlone(t *testing.T) {
	for in, want := range map[string]string{
		"k-1a2b3c":                    "k-1a2b3c",
		"host:bench1 (amd64) · 1.00×": "host:bench1 (amd64) · 1.00×",
		"naïve 測定 ✓":                  "naïve 測定 ✓",
		`C:\path`:                     `C:\path`,
		"\x1b]0;PWNED\x07\x1b[2J\nrun FAKE: imported as #999": `\x1b]0;PWNED\x07\x1b[2J\nrun FAKE: imported as #999`,
		"a\tb\rc\x00d\x7fe":      `a\tb\rc\x00d\x7fe`,
		"c1 \u009b31m csi":       `c1 \u009b31m csi`,
		"rtl \u202egnp.exe":      `rtl \u202egnp.exe`,
		"not utf-8 \xff\xfe end": `not utf-8 \xff\xfe end`,
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %q, want %q", in, got, want)
		}
	}
}
