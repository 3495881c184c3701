package testutil

import (
	"io"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseMetrics parses metrics in the Prometheus text format, by family name.
func ParseMetrics(t testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return families
}

// Series returns "labels → value" of family name: the value of counters and
// gauges, the sample count of histograms. Labels are written k=v,… in sorted
// order; "" is the series without labels.
func Series(families map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := families[name]
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		var labels []string
		for _, l := range m.Label {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(labels)
		key := strings.Join(labels, ",")
		switch {
		case m.Counter != nil:
			out[key] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[key] = m.Gauge.GetValue()
		case m.Histogram != nil:
			out[key] = float64(m.Histogram.GetSampleCount())
		}
	}
	return out
}
