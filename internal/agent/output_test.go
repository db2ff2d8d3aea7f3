package agent

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// A runaway log between a program's header and its closing metric: the
// cut keeps both ends in whole lines and says exactly what it dropped.
func TestCutOutputKeepsBeginningAndEndInWholeLines(t *testing.T) {
	var out bytes.Buffer
	for i := range 50 {
		fmt.Fprintf(&out, "line %03d\n", i)
	}
	out.WriteString("score: 42\n")
	b := newCutBuffer(100)
	for p := out.Bytes(); len(p) > 0; { // odd-sized writes wrap the ring
		n := min(7, len(p))
		b.Write(p[:n])
		p = p[n:]
	}
	got, cut := b.result()
	if cut == nil {
		t.Fatalf("%d bytes kept of %d with a limit of 100, and no cut", len(got), out.Len())
	}
	if !bytes.HasPrefix(got, []byte("line 000\nline 001\n")) || !bytes.HasSuffix(got, []byte("line 049\nscore: 42\n")) {
		t.Errorf("kept %q, want the first and the last lines", got)
	}
	whole := regexp.MustCompile(`^(line \d{3}|score: 42)$`)
	for _, l := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		if !whole.MatchString(l) {
			t.Errorf("kept a broken line %q", l)
		}
	}
	if cut.Total != int64(out.Len()) || cut.At != 18 || cut.Dropped+int64(len(got)) != cut.Total {
		t.Errorf("cut %+v of %d bytes with %d kept", *cut, out.Len(), len(got))
	}
	if !bytes.Equal(got[cut.At:], out.Bytes()[cut.At+cut.Dropped:]) {
		t.Errorf("the kept end is not the output's from byte %d", cut.At+cut.Dropped)
	}
}

func TestCutOutputWithinTheLimitIsWhole(t *testing.T) {
	for _, size := range []int{0, 1, 99, 100} {
		want := bytes.Repeat([]byte("ab\n"), 34)[:size]
		b := newCutBuffer(100)
		b.Write(want)
		if got, cut := b.result(); !bytes.Equal(got, want) || cut != nil {
			t.Errorf("%d bytes: kept %d, cut %v", size, len(got), cut)
		}
	}
}

// Without a newline there are no lines to keep whole: the room is filled.
func TestCutOutputWithoutLinesFillsTheRoom(t *testing.T) {
	b := newCutBuffer(100)
	b.Write(bytes.Repeat([]byte("x"), 150))
	b.Write([]byte("END"))
	got, cut := b.result()
	if len(got) != 100 || !bytes.HasSuffix(got, []byte("xEND")) || *cut != (Cut{At: 25, Dropped: 53, Total: 153}) {
		t.Errorf("kept %d bytes ending %q, cut %+v", len(got), got[len(got)-4:], cut)
	}
}

func TestReplyCutsSaysWhereEachStreamWasCut(t *testing.T) {
	r := Reply{Truncated: true, StdoutCut: &Cut{At: 10, Dropped: 90, Total: 200}}
	if got, want := r.Cuts(), "output was cut: stdout's bytes 10 to 100 of 200 dropped, its beginning and end kept"; got != want {
		t.Errorf("Cuts() = %q, want %q", got, want)
	}
	if got := (Reply{}).Cuts(); got != "" {
		t.Errorf("a whole output's Cuts() = %q", got)
	}
}
