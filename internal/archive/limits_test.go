package archive

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
)

// hostileFile is a file of runs (key r0, r1, …) each announcing and
// holding samples short samples, with a trailer whose sum is wrong: what
// a machine sending back runs could forge, a few bytes a sample once
// zipped.
func hostileFile(t testing.TB, runs, samples int) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	fmt.Fprintf(gz, `{"format":"vfleet-runs","version":1,"schema":%d,"vfleet":"dev","runs":%d}`+"\n", store.CarriedSchemaVersion(), runs)
	sample := []byte(`{"sample":{"guest":"c1","group":"c","kind":"container","runtime":"runc","workload_id":"fio-randread","workload":"fio","params":{"rw":"randread"},"repetition":0,"metric":"read_clat_mean","unit":"us","value":1,"better":"lower","at_ns":1,"wall_ns":1,"cpu_ns":1}}` + "\n")
	for r := range runs {
		fmt.Fprintf(gz, `{"run":{"key":"r%d","origin":"","scenario_name":"x","scenario_source":"","scenario_text":"","scenario_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","baseline":"host","started_ns":1,"finished_ns":2,"status":"complete","status_reason":"","host":{},"guests":{"c1":{"group":"c","kind":"container","boot_ns":0}},"dropped":null,"samples":%d,"failures":0,"audits":0}}`+"\n", r, samples)
		for range samples {
			gz.Write(sample)
		}
	}
	fmt.Fprintf(gz, `{"end":{"runs":%d,"samples":%d,"failures":0,"audits":0,"sha256":"%s"}}`+"\n", runs, runs*samples, strings.Repeat("0", 64))
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// allocated imports file into st and returns the error and the bytes the
// import allocated.
func allocated(st *store.Store, file []byte) (error, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Import(context.Background(), st, bytes.NewReader(file), ImportOptions{})
	runtime.ReadMemStats(&after)
	return err, after.TotalAlloc - before.TotalAlloc
}

// A file announcing more samples than an import holds is refused at the
// run that announces them, before they are read: its memory does not
// grow with what it announces.
func TestHostileFileIsRefusedBeforeItIsHeld(t *testing.T) {
	file := hostileFile(t, 1, 500_000)
	st := openStore(t)
	err, alloc := allocated(st, file)
	t.Logf("%d samples in %d bytes: refused allocating %d KiB", 500_000, len(file), alloc>>10)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("import: %v, want %v", err, ErrTooLarge)
	}
	if alloc > 16<<20 {
		t.Errorf("refusing it allocated %d MiB", alloc>>20)
	}
	if got := rowCounts(t, st); got != [4]int{} {
		t.Errorf("the store holds %v rows", got)
	}
}

// Runs each within MaxRunRecords but together over MaxRecords are refused
// at the run that passes it, the runs before it held and no more.
func TestFileOverMaxRecordsIsRefused(t *testing.T) {
	runs := MaxRecords/MaxRunRecords + 1
	file := hostileFile(t, runs, MaxRunRecords)
	st := openStore(t)
	err, alloc := allocated(st, file)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf(`run "r%d"`, runs-1)) {
		t.Fatalf("import: %v, want %v at run r%d", err, ErrTooLarge, runs-1)
	}
	// About 4.4 KiB allocated a sample read (most of it garbage at once).
	if per := alloc / uint64(MaxRecords); per > 16<<10 {
		t.Errorf("refusing it allocated %d bytes a sample held", per)
	}
}
