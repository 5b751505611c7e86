package telemetry

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentUse hammers one registry from many goroutines (creating
// series, observing, opening and closing connections, reloading handles)
// while another goroutine scrapes, then checks the totals. Run with -race.
func TestConcurrentUse(t *testing.T) {
	const (
		workers = 8
		perWork = 2000
	)
	r := NewRegistry()
	methods := [][]byte{[]byte("GET"), []byte("POST"), []byte("WEIRD")}
	statuses := []int{200, 404, 503, 0}

	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			fams, err := parseExposition(r)
			if err != nil {
				scraped <- err
				return
			}
			if f := fams[famRequestDuration]; f != nil {
				for _, m := range f.GetMetric() {
					h := m.GetHistogram()
					bs := h.GetBucket()
					// _count must equal the +Inf bucket even mid-update.
					if bs[len(bs)-1].GetCumulativeCount() != h.GetSampleCount() {
						scraped <- fmt.Errorf("+Inf bucket %d != count %d", bs[len(bs)-1].GetCumulativeCount(), h.GetSampleCount())
						return
					}
				}
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			bind := r.Bind(8080)
			for i := range perWork {
				// Re-resolving the handle models reloads racing with traffic.
				m := r.Route("route", "backend")
				m.Observe(methods[(w+i)%len(methods)], statuses[i%len(statuses)], time.Duration(i)*time.Microsecond, 1, 2)
				bind.ConnOpened()
				if i%10 == 0 {
					r.Backend("backend").ConnectError()
				}
				bind.ConnClosed()
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-scraped; err != nil {
		t.Fatalf("concurrent scrape: %v", err)
	}

	fams := scrape(t, r)
	var total float64
	for _, m := range fams[famRequests].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	checks := []struct {
		desc string
		got  float64
		want float64
	}{
		{"requests", total, workers * perWork},
		{"series count", float64(len(fams[famRequests].GetMetric())), float64(len(methods) * len(statuses))},
		{"histogram count", float64(find(t, fams, famRequestDuration, nil).GetHistogram().GetSampleCount()), workers * perWork},
		{"bytes in", counterValue(t, fams, famRequestBytes, nil), workers * perWork},
		{"bytes out", counterValue(t, fams, famResponseBytes, nil), 2 * workers * perWork},
		{"accepted", counterValue(t, fams, famConnectionsTotal, nil), workers * perWork},
		{"open", find(t, fams, famConnectionsOpened, nil).GetGauge().GetValue(), 0},
		{"connect errors", counterValue(t, fams, famConnectErrors, nil), workers * perWork / 10},
	}
	for _, c := range checks {
		t.Run(c.desc, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.desc, c.got, c.want)
			}
		})
	}
}
