package archive

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"os"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
)

var update = flag.Bool("update", false, "rewrite testdata/runs.vfr, the file the fuzz targets start from")

const seedFile = "testdata/runs.vfr"

// The seed file is a real export of fill's runs: it still imports, and
// exported again from the store it went to, it is the same file, so the
// format has not moved under it.
func TestSeedFileIsCurrent(t *testing.T) {
	if *update {
		a := openStore(t)
		if err := os.WriteFile(seedFile, export(t, a, fill(t, a)...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seed, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatalf("%v (go test -run TestSeedFileIsCurrent -update writes it)", err)
	}
	b := openStore(t)
	imported := importFile(t, b, seed, ImportOptions{})
	if len(imported) != 3 {
		t.Fatalf("imported %+v from the seed file", imported)
	}
	if !bytes.Equal(unzip(t, export(t, b, ids(imported)...)), unzip(t, seed)) {
		t.Fatalf("%s exported again differs (go test -run TestSeedFileIsCurrent -update rewrites it, if the format's version says so)", seedFile)
	}
}

// FuzzImport feeds arbitrary bytes as a file: no panic, and a file refused
// changes nothing in the store. A file that imports can be exported again,
// and importing that changes nothing either.
func FuzzImport(f *testing.F) {
	st := openStore(f) // one per fuzzing process: opening one is far slower than an execution
	seed, err := os.ReadFile(seedFile)
	if err != nil {
		f.Fatal(err)
	}
	flipped := bytes.Clone(seed)
	flipped[len(flipped)/2] ^= 1
	for _, b := range [][]byte{seed, seed[:len(seed)/2], seed[:len(seed)-4], flipped, {}, []byte("\x1f\x8b")} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, file []byte) { checkImport(t, st, file) })
}

// FuzzImportLines fuzzes the lines inside the gzip stream, which FuzzImport
// seldom gets through the stream's checksum to; with fixSum the trailer is
// given the file's sum, so that what a forger could write reaches the
// store's own checks.
func FuzzImportLines(f *testing.F) {
	st := openStore(f)
	seed, err := os.ReadFile(seedFile)
	if err != nil {
		f.Fatal(err)
	}
	plain := unzip(f, seed)
	f.Add(plain, false)
	f.Add(plain[:len(plain)/2], true)
	f.Add(bytes.Replace(plain, []byte(`"value":123.45`), []byte(`"value":"NaN"`), 1), true)
	f.Add(bytes.Replace(plain, []byte(`"status":"aborted"`), []byte(`"status":"running"`), 1), true)
	f.Add([]byte(`{"format":"vfleet-runs","version":1,"schema":1,"vfleet":"dev","runs":0}`+"\n"+`{"end":{"runs":0}}`+"\n"), true)
	f.Fuzz(func(t *testing.T, plain []byte, fixSum bool) {
		if fixSum {
			plain = withSum(plain)
		}
		checkImport(t, st, rezip(t, plain))
	})
}

// checkImport imports file into st: a file refused must leave st as it
// was, and one imported must export and import again as runs already
// there. The runs of the files that import stay in st, a store with runs,
// as imports meet it. An import allocates in proportion to what it reads,
// whatever the file announces.
func checkImport(t *testing.T, st *store.Store, file []byte) {
	before := rowCounts(t, st)
	size := max(int64(len(file)), unzippedSize(file))
	err, alloc := allocated(st, file)
	if limit := uint64(allocBase + allocPerByte*size); alloc > limit {
		t.Fatalf("importing %d bytes (%d unzipped) allocated %d, over %d", len(file), size, alloc, limit)
	}
	if err != nil {
		if got := rowCounts(t, st); got != before {
			t.Fatalf("a refused file (%v) changed the store: %v rows, were %v", err, got, before)
		}
		return
	}
	imported := importFile(t, st, file, ImportOptions{}) // the runs it imported, now there
	again := export(t, st, ids(imported)...)
	after := rowCounts(t, st)
	for _, im := range importFile(t, st, again, ImportOptions{}) {
		if !im.Existed || im.Differs {
			t.Fatalf("run %s imported from its own export as %+v", im.Key, im)
		}
	}
	if got := rowCounts(t, st); got != after {
		t.Fatalf("importing runs already there changed the store: %v rows, were %v", got, after)
	}
}

// The allocations an import may make: a base (the store's queries, the
// gzip reader) and a multiple of the bytes it reads, each of which it
// decodes (about 20 bytes allocated a byte of a sample's line).
const (
	allocBase    = 16 << 20
	allocPerByte = 64
)

// unzippedSize is the size of file's gzip stream once unzipped, as far as
// it goes and at most one past what an import reads.
func unzippedSize(file []byte) int64 {
	gz, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		return 0
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(gz, MaxDecoded+1))
	return n
}

// withSum gives the trailer, if the last line is one, the sum of the
// lines before it.
func withSum(plain []byte) []byte {
	lines := bytes.SplitAfter(bytes.TrimSuffix(plain, []byte("\n")), []byte("\n"))
	var rec record
	if len(lines) < 2 || json.Unmarshal(lines[len(lines)-1], &rec) != nil || rec.End == nil {
		return plain
	}
	body := bytes.Join(lines[:len(lines)-1], nil)
	sum := sha256.Sum256(body)
	rec.End.SHA256 = hex.EncodeToString(sum[:])
	end, err := json.Marshal(rec)
	if err != nil {
		return plain
	}
	return append(append(bytes.Clone(body), end...), '\n')
}
