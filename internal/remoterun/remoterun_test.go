package remoterun

import (
	"fmt"
	"reflect"
	"testing"
)

// The remote vfleet's output comes in pieces of any size: each line is
// given once, whole, without its line end, and what follows the last
// newline only when flushed.
func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(s string) { got = append(got, s) }}
	for _, piece := range []string{"[0:01] one", " line\r\n[0:02] two\n\n", "partial"} {
		fmt.Fprint(w, piece)
	}
	if want := []string{"[0:01] one line", "[0:02] two", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("before Flush: %q; want %q", got, want)
	}
	w.Flush()
	w.Flush()
	if got[len(got)-1] != "partial" || len(got) != 4 {
		t.Errorf("after Flush: %q; want the partial line once", got)
	}
}
