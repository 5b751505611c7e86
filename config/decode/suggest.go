package decode

import "strings"

// maxSuggestDistance is the largest edit distance at which a known name is
// offered as a suggestion; shorter words allow fewer edits (one edit per
// three characters), so that "UDP" does not suggest "TCP".
const maxSuggestDistance = 2

// Suggest returns the name of candidates that s most likely misspells, as
// the decoder suggests it for an unknown field ("did you mean ...?"); ""
// when none is close.
func Suggest(s string, candidates []string) string { return closest(s, candidates) }

// closest returns the candidate nearest to s: one equal but for case, else
// the first nearest one within the allowed distance; "" when none is close.
func closest(s string, candidates []string) string {
	allowed := min(maxSuggestDistance, len(s)/3)
	best, bestDist := "", allowed+1
	for _, c := range candidates {
		if c == s {
			continue
		}
		if strings.EqualFold(c, s) {
			return c
		}
		if d := editDistance(s, c, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (in bytes: insertions, deletions, substitutions and transpositions of
// adjacent bytes), or limit when it is at least limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	// Three rows: two back (for transpositions), previous, current.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit)
}
