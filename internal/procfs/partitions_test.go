package procfs

import (
	"reflect"
	"testing"
)

func TestParsePartitions(t *testing.T) {
	text := "major minor  #blocks  name\n\n 254        0  268435456 vda\n 254        1     1024 vda1\n   7        0    4096 loop0\n 8 0 1 cciss/c0d0\n"
	want := []Partition{{254, 0, "vda"}, {254, 1, "vda1"}, {7, 0, "loop0"}}
	if got := ParsePartitions(text); !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePartitions = %+v, want %+v", got, want)
	}
}
