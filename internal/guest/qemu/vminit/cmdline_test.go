package vminit

import (
	"os"
	"testing"
)

// testdata/cmdline is /proc/cmdline as a q35 guest booted by vfleet saw it.
func TestParseCmdline(t *testing.T) {
	b, err := os.ReadFile("testdata/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	got := ParseCmdline(string(b))
	for k, want := range map[string]string{"root": "/dev/vda", ParamHostname: "conf-a", ParamPort: "vfleet.agent", "ro": "", "console": "ttyS0"} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %q (present %v), want %q", k, v, ok, want)
		}
	}
	if _, ok := got["--pid1"]; ok {
		t.Error("init's arguments after -- were taken as parameters")
	}
	q := ParseCmdline(`a="x y" b=1 -- c=2`)
	if q["a"] != "x y" || q["b"] != "1" || len(q) != 2 {
		t.Errorf("quoted: %v", q)
	}
}

func TestInitArgsSkipUnknownKernelWords(t *testing.T) {
	got := InitArgs([]string{"nokaslr", "quiet", "--pid1", "--workdir", "/w"})
	if len(got) != 3 || got[0] != "--pid1" || got[2] != "/w" {
		t.Fatalf("got %q", got)
	}
	if got := InitArgs([]string{"splash"}); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
}
