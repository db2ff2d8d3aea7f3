package remote

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Target
	}{
		{"ssh://lab@peer.example", Target{User: "lab", Host: "peer.example", Port: 22}},
		{"ssh://root@198.18.0.2:2222", Target{User: "root", Host: "198.18.0.2", Port: 2222}},
		{"ssh://root@198.18.0.2:2222/", Target{User: "root", Host: "198.18.0.2", Port: 2222}},
		{"ssh://me@[2001:db8::1]:22", Target{User: "me", Host: "2001:db8::1", Port: 22}},
		{"ssh://me@[2001:db8::1]", Target{User: "me", Host: "2001:db8::1", Port: 22}},
	} {
		got, err := ParseURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	for in, why := range map[string]string{
		"root@198.18.0.2":              "scheme",
		"http://root@198.18.0.2":       "scheme",
		"ssh:root@198.18.0.2":          "no //",
		"ssh://198.18.0.2":             "no user",
		"ssh://@198.18.0.2":            "no user",
		"ssh://root:secret@198.18.0.2": "password",
		"ssh://root@198.18.0.2/tmp":    "only a user",
		"ssh://root@198.18.0.2?x=1":    "only a user",
		"ssh://root@198.18.0.2#x":      "only a user",
		"ssh://root@":                  "no host",
		"ssh://root@198.18.0.2:0":      "port",
		"ssh://root@198.18.0.2:65536":  "port",
		"ssh://root@198.18.0.2:ssh":    "",
		"ssh://root@198.18.0.2:":       "empty port",
		"ssh://root@[2001:db8::1":      "",
		"ssh://-oProxyCommand=x@h":     "starts with -",
		"ssh://-@198.18.0.2":           "starts with -",
	} {
		_, err := ParseURL(in)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "ssh://USER@HOST[:PORT]") {
			t.Errorf("ParseURL(%q) = %v; want ErrBadURL saying %q and the form", in, err, why)
		}
	}
}

func TestTargetString(t *testing.T) {
	for _, s := range []string{"ssh://root@198.18.0.2:22", "ssh://me@[2001:db8::1]:2222"} {
		tg, err := ParseURL(s)
		if err != nil || tg.String() != s || "ssh://"+tg.Name() != s {
			t.Errorf("ParseURL(%q): String %q, Name %q, %v", s, tg.String(), tg.Name(), err)
		}
	}
}

// The hint that accepts a host key is pasted into a shell: it runs ssh
// with exactly the words it shows, whatever the user and the file hold,
// and runs nothing else.
func TestAcceptCommandIsQuotedForAShell(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/known hosts $(touch pwned) 'x'"
	tg := Target{User: "$(touch pwned) me`touch pwned`", Host: "127.0.0.1", Port: 2227}
	hint := acceptCommand(file, tg)
	// ssh is a function printing its arguments, one a line.
	cmd := exec.Command("sh", "-c", `ssh() { printf '%s\n' "$@"; }; `+hint)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", hint, err)
	}
	want := []string{"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + file, "-p", "2227", tg.User + "@127.0.0.1", "true"}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("%s\nruns ssh with %q, want %q", hint, got, want)
	}
	if _, err := os.Stat(dir + "/pwned"); err == nil {
		t.Errorf("%s ran a command of the user name or the file name", hint)
	}
	// A plain hint stays plain.
	if got := acceptCommand("/root/.ssh/known_hosts", Target{User: "root", Host: "198.18.0.2", Port: 22}); got !=
		"ssh -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/root/.ssh/known_hosts -p 22 root@198.18.0.2 true" {
		t.Errorf("plain hint: %s", got)
	}
}
