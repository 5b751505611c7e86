package telemetry

import (
	"strconv"
	"sync/atomic"
	"time"
)

// durationBuckets are the upper bounds (seconds) of the request-duration
// histogram's finite buckets; a final +Inf bucket is implied.
var durationBuckets = [...]float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

const numBuckets = len(durationBuckets) + 1 // + the +Inf bucket

// bucketBounds are durationBuckets as durations, so observing compares
// integers instead of converting each observation to float seconds.
var bucketBounds = func() (b [len(durationBuckets)]time.Duration) {
	for i, s := range durationBuckets {
		b[i] = time.Duration(s * float64(time.Second))
	}
	return b
}()

// bucketLabels are the pre-rendered "le" label values.
var bucketLabels = func() (l [numBuckets]string) {
	for i, s := range durationBuckets {
		l[i] = strconv.FormatFloat(s, 'g', -1, 64)
	}
	l[numBuckets-1] = "+Inf"
	return l
}()

// durationHistogram is a fixed-bucket Prometheus histogram of durations.
// Each observation increments exactly one (non-cumulative) bucket and adds
// to the sum; the exposition accumulates the buckets and reports the total
// as _count, so _count always equals the +Inf bucket even while
// observations race with a scrape.
type durationHistogram struct {
	buckets  [numBuckets]atomic.Uint64
	sumNanos atomic.Uint64
}

// observe records d; negative durations count as zero.
func (h *durationHistogram) observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	i := 0
	for i < len(bucketBounds) && d > bucketBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNanos.Add(uint64(d))
}

// appendTo appends the series of h (buckets, sum, count) in Prometheus text
// format. labels is the pre-rendered label list without braces, e.g.
// `route="r"`.
func (h *durationHistogram) appendTo(b []byte, name, labels string) []byte {
	b, count := appendBuckets(b, name, labels, bucketLabels[:], h.buckets[:])
	sum := float64(h.sumNanos.Load()) / float64(time.Second)
	b = append(b, name...)
	b = append(b, "_sum{"...)
	b = append(b, labels...)
	b = append(b, "} "...)
	b = strconv.AppendFloat(b, sum, 'g', -1, 64)
	b = append(b, '\n')
	return appendCount(b, name, labels, count)
}

// appendBuckets appends a histogram's cumulative _bucket lines, counts
// being its per-bucket (non-cumulative) counts and le their bounds'
// labels, and returns the total, its _count: read once, so that _count
// always equals the +Inf bucket while observations race with a scrape.
func appendBuckets(b []byte, name, labels string, le []string, counts []atomic.Uint64) ([]byte, uint64) {
	var cum uint64
	for i := range counts {
		cum += counts[i].Load()
		b = append(b, name...)
		b = append(b, "_bucket{"...)
		b = append(b, labels...)
		b = append(b, `,le="`...)
		b = append(b, le[i]...)
		b = append(b, `"} `...)
		b = strconv.AppendUint(b, cum, 10)
		b = append(b, '\n')
	}
	return b, cum
}

// appendCount appends a histogram's _count line.
func appendCount(b []byte, name, labels string, count uint64) []byte {
	b = append(b, name...)
	b = append(b, "_count{"...)
	b = append(b, labels...)
	b = append(b, "} "...)
	b = strconv.AppendUint(b, count, 10)
	return append(b, '\n')
}
