package telemetry

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// goldenRegistry fills a registry with a fixed set of events.
func goldenRegistry() *Registry {
	r := NewRegistry()
	api := r.Route("default/api", "svc-a")
	api.Observe([]byte("GET"), 200, 700*time.Microsecond, 120, 2048)
	api.Observe([]byte("GET"), 200, 30*time.Millisecond, 120, 4096)
	api.Observe([]byte("POST"), 502, 2*time.Second, 900, 12)
	r.Route("default/web", "svc-b").Observe([]byte("PROPFIND"), 0, 15*time.Second, 0, 0)
	r.Backend("svc-a").ConnectError()
	b := r.Bind(3000)
	b.ConnOpened()
	b.ConnOpened()
	b.ConnClosed()
	return r
}

func TestExpositionGolden(t *testing.T) {
	var buf bytes.Buffer
	goldenRegistry().WritePrometheus(&buf)
	path := filepath.Join("testdata", "exposition.golden")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("exposition differs from %s (run with -update if intended):\n%s", path, buf.Bytes())
	}
}

// TestExposeMetadataSwitch checks that the library's process-wide metadata
// switch does not produce duplicate # HELP/# TYPE lines.
func TestExposeMetadataSwitch(t *testing.T) {
	metrics.ExposeMetadata(true)
	defer metrics.ExposeMetadata(false)
	var buf bytes.Buffer
	goldenRegistry().WritePrometheus(&buf)
	want, err := os.ReadFile(filepath.Join("testdata", "exposition.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("output with ExposeMetadata(true) differs from the golden file:\n%s", buf.Bytes())
	}
	scrape(t, goldenRegistry())
}

func TestAppendAnnotated(t *testing.T) {
	tests := []struct {
		desc string
		raw  string
		want string
	}{
		{"empty", "", ""},
		{
			"library metadata dropped, ours added",
			"# HELP agentgateway_upstream_connect_errors_total\n# TYPE agentgateway_upstream_connect_errors_total counter\nagentgateway_upstream_connect_errors_total{backend=\"a\"} 1\n",
			"# HELP agentgateway_upstream_connect_errors_total " + families[famConnectErrors].help + "\n# TYPE agentgateway_upstream_connect_errors_total counter\nagentgateway_upstream_connect_errors_total{backend=\"a\"} 1\n",
		},
		{
			"interleaved family lines are regrouped",
			"x_total{a=\"1\"} 1\ny 2\nx_total{a=\"2\"} 3\n",
			"x_total{a=\"1\"} 1\nx_total{a=\"2\"} 3\ny 2\n",
		},
		{"missing final newline", "y 2", "y 2\n"},
		{"blank lines skipped", "\n\ny 2\n\n", "y 2\n"},
		{"line without value skipped", "garbage\ny 2\n", "y 2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := string(appendAnnotated(nil, []byte(tc.raw))); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
