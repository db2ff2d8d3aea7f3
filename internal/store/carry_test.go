package store

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
)

// carriedTables are the tables CarryRun reads.
var carriedTables = []string{"runs", "samples", "histograms", "failures", "audits", "step_loads"}

// schemaAt makes a database of the first n migrations only.
func schemaAt(t *testing.T, n int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", n)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i, m := range migrations[:n] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	return db
}

// carriedColumns describes every column of the carried tables.
func carriedColumns(t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range carriedTables {
		rows, err := db.Query(`SELECT name, type, "notnull", COALESCE(dflt_value, ''), pk FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, typ, dflt string
			var notNull, pk int
			if err := rows.Scan(&name, &typ, &notNull, &dflt, &pk); err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], fmt.Sprintf("%s %s notnull=%d default=%q pk=%d", name, typ, notNull, dflt, pk))
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The version files record for their runs moves with the carried tables
// and with nothing else: a migration of another table (8: baselines) must
// leave files readable by the vfleet before it.
func TestCarriedSchemaIsTheLastChangeOfACarriedTable(t *testing.T) {
	now := carriedColumns(t, schemaAt(t, len(migrations)))
	if got := carriedColumns(t, schemaAt(t, carriedSchema)); !reflect.DeepEqual(got, now) {
		t.Errorf("a migration after %d changed a carried table: set carriedSchema to it (and carry what it added)\nat %d: %v\nnow: %v",
			carriedSchema, carriedSchema, got, now)
	}
	if before := carriedColumns(t, schemaAt(t, carriedSchema-1)); reflect.DeepEqual(before, now) {
		t.Errorf("migration %d changed no carried table: carriedSchema is the last that did", carriedSchema)
	}
}
