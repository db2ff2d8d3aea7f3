package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

func TestCapacitySearchRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	in := CapacitySearch{
		ScenarioName: "fleet-scaling", ScenarioHash: "abc", SLOs: []string{"cpu.events_per_sec >= 0.8 alone"},
		Result:  json.RawMessage(`{"answer":2}`),
		Host:    hostinfo.Fingerprint{Hostname: "h"},
		Started: time.Date(2026, 11, 25, 18, 0, 0, 1, time.UTC), Finished: time.Date(2026, 11, 25, 18, 5, 0, 2, time.UTC),
	}
	id, err := s.AddCapacitySearch(ctx, &in)
	if err != nil {
		t.Fatal(err)
	}
	requireAllSet(t, in)
	out, err := s.GetCapacitySearch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Errorf("got %+v\nwant %+v", out, in)
	}
	if _, err := s.GetCapacitySearch(ctx, id+1); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing search: %v", err)
	}
}
