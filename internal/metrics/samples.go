package metrics

import (
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vfleet/vfleet/internal/store"
)

const sampleHelp = "Latest measured value of one metric of one workload in one guest, in the unit its label names; each repetition overwrites it."

// sampleLabels come first on every vfleet_sample_value series; a sample's
// workload parameters follow as param_NAME labels.
var sampleLabels = []string{"run", "group", "guest", "workload", "metric", "unit"}

// valueSet keeps the latest value of every dimension set, so the number of
// series stays that of the plan's dimensions however many repetitions run.
// It is not safe for concurrent use.
type valueSet struct {
	series map[string]*series
	// descs holds one descriptor per label-name list: workloads have
	// different parameters, so their series have different labels.
	descs map[string]*prometheus.Desc
}

type series struct {
	desc   *prometheus.Desc
	labels []string
	value  float64
}

func newValueSet() *valueSet {
	return &valueSet{series: map[string]*series{}, descs: map[string]*prometheus.Desc{}}
}

// add overwrites the series of each sample's dimension set.
func (vs *valueSet) add(samples []store.Sample) {
	for _, s := range samples {
		keys := make([]string, 0, len(s.Params))
		for k := range s.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		names := append([]string(nil), sampleLabels...)
		values := []string{strconv.FormatInt(s.RunID, 10), s.Group, s.Guest, s.WorkloadID, s.Metric, s.Unit}
		for _, k := range keys {
			names = append(names, paramLabel(k))
			values = append(values, s.Params[k])
		}
		// The repetition is left out on purpose: it would make one series
		// per repetition, which is what the store is for.
		id := strings.Join(values, "\x00") + "\x01" + strings.Join(names[len(sampleLabels):], "\x00")
		if se, ok := vs.series[id]; ok {
			se.value = s.Value
			continue
		}
		vs.series[id] = &series{desc: vs.desc(names), labels: values, value: s.Value}
	}
}

func (vs *valueSet) desc(names []string) *prometheus.Desc {
	key := strings.Join(names, ",")
	d, ok := vs.descs[key]
	if !ok {
		d = prometheus.NewDesc("vfleet_sample_value", sampleHelp, names, nil)
		vs.descs[key] = d
	}
	return d
}

// metrics returns the current series as constant metrics.
func (vs *valueSet) metrics() []prometheus.Metric {
	out := make([]prometheus.Metric, 0, len(vs.series))
	for _, se := range vs.series {
		out = append(out, prometheus.MustNewConstMetric(se.desc, prometheus.GaugeValue, se.value, se.labels...))
	}
	return out
}

// paramLabel turns a workload parameter's name into a label name: prefixed,
// so it never clashes with the fixed labels, and with every character
// Prometheus does not allow in a label name replaced by '_'.
func paramLabel(name string) string {
	var b strings.Builder
	b.WriteString("param_")
	for _, r := range name {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
