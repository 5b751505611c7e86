package telemetry

import "bytes"

// appendMeta appends the # HELP and # TYPE lines of f.
func appendMeta(b []byte, f family) []byte {
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.typ...)
	return append(b, '\n')
}

// appendAnnotated appends the samples of raw (the metrics set's output),
// grouped by family in order of first appearance, each group preceded by its
// # HELP and # TYPE lines. Comment lines in raw are dropped: the library
// writes metadata only when its process-wide ExposeMetadata switch is on,
// and then without help text, so this package writes its own instead.
func appendAnnotated(b, raw []byte) []byte {
	type group struct {
		name  string
		lines [][]byte
	}
	var groups []*group
	byName := make(map[string]*group)
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		end := bytes.IndexAny(line, "{ ")
		if end < 0 {
			continue // not a sample line; the set never writes one
		}
		g := byName[string(line[:end])]
		if g == nil {
			g = &group{name: string(line[:end])}
			byName[g.name] = g
			groups = append(groups, g)
		}
		g.lines = append(g.lines, line)
	}
	for _, g := range groups {
		if f, ok := families[g.name]; ok {
			b = appendMeta(b, f)
		}
		for _, l := range g.lines {
			b = append(b, l...)
			b = append(b, '\n')
		}
	}
	return b
}
