package telemetry

import "strings"

// unknownLabel stands in for an empty label value, as agentgateway does: an
// empty value would make Prometheus treat the label as absent.
const unknownLabel = "unknown"

// appendLabel appends name="value" to b, escaping value for the Prometheus
// text format (backslash, double quote and newline) and replacing invalid
// UTF-8, which Prometheus rejects, with U+FFFD.
func appendLabel(b []byte, name, value string) []byte {
	if value == "" {
		value = unknownLabel
	}
	value = strings.ToValidUTF8(value, "\uFFFD")
	b = append(b, name...)
	b = append(b, '=', '"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// seriesName builds family{l1="v1",l2="v2",...} from alternating label names
// and values. It runs when a series is first created, never per request.
func seriesName(fam string, labels ...string) string {
	b := make([]byte, 0, len(fam)+64)
	b = append(b, fam...)
	b = append(b, '{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabel(b, labels[i], labels[i+1])
	}
	b = append(b, '}')
	return string(b)
}
