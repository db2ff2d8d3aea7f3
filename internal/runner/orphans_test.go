package runner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

func TestAbortOrphansMarksOnlyRunsWhoseOwnerIsGone(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	self, err := procfs.Self()
	if err != nil {
		t.Fatal(err)
	}
	dead := testutil.DeadProcess(t)
	runs := map[string]*store.Run{
		"live":          {Owner: self, Key: "r1-live"},
		"dead":          {Owner: dead, Key: "r2-dead"},
		"fleet":         {Key: "r3-fleet"},
		"cleaned fleet": {Key: "r4-cleaned"},
		"old":           {}, // written before runs had owners
	}
	ids := map[string]int64{}
	for name, r := range runs {
		r.ScenarioName, r.ScenarioText, r.Baseline = name, []byte(name), "host"
		if ids[name], err = st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := st.SetRunKey(ctx, ids[name], r.Key); err != nil {
			t.Fatal(err)
		}
	}
	aborted, err := AbortOrphans(ctx, st, map[string]bool{"r4-cleaned": true})
	if err != nil || len(aborted) != 2 {
		t.Fatalf("aborted %+v, %v; want the dead owner's run and the cleaned fleet's", aborted, err)
	}
	for name, want := range map[string]string{"live": store.StatusRunning, "dead": store.StatusAborted, "fleet": store.StatusRunning,
		"cleaned fleet": store.StatusAborted, "old": store.StatusRunning} {
		r, _ := st.GetRun(ctx, ids[name])
		if r.Status != want || (want == store.StatusAborted) != (r.StatusReason != "") {
			t.Errorf("run %q: %s (%q), want %s with a reason when aborted", name, r.Status, r.StatusReason, want)
		}
	}
	if again, err := AbortOrphans(ctx, st, nil); err != nil || len(again) != 0 {
		t.Errorf("a second pass aborted %+v, %v; want nothing", again, err)
	}
}
