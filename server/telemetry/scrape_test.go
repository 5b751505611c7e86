package telemetry

import (
	"bytes"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape renders r and parses the result as a Prometheus text exposition,
// failing the test if it does not parse.
func scrape(t testing.TB, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := parseExposition(r)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// parseExposition renders r and parses it; safe to call off the test goroutine.
func parseExposition(r *Registry) (map[string]*dto.MetricFamily, error) {
	var buf bytes.Buffer
	r.WritePrometheus(&buf)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("exposition does not parse: %w\n%s", err, buf.Bytes())
	}
	return fams, nil
}

// find returns the metric of family name whose labels include all of want.
func find(t testing.TB, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("family %s missing", name)
	}
next:
	for _, m := range f.GetMetric() {
		got := make(map[string]string)
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("family %s has no series with labels %v", name, want)
	return nil
}

// counterValue returns the value of a counter series.
func counterValue(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	return find(t, fams, name, labels).GetCounter().GetValue()
}
