package decode

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// relErr is a RelativeError, as policy.FieldError is.
type relErr struct{ field, msg string }

func (e *relErr) Error() string                     { return e.field + ": " + e.msg }
func (e *relErr) RelativeField() (path, msg string) { return e.field, e.msg }

// TestUnder: a sub-error's path is joined below the path it is put under,
// an index without a dot, whatever its type; neither its path nor its
// position is written into the message.
func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		desc, path string
		err        error
		want       string
	}{
		{"an index below a field", "p.localRateLimit", &FieldError{Path: "[1].maxTokens", Msg: "m", Line: 3, Col: 4}, "p.localRateLimit[1].maxTokens: m"},
		{"a field below a field", "p.localRateLimit", &FieldError{Path: "conditional[0].maxTokens", Msg: "m"}, "p.localRateLimit.conditional[0].maxTokens: m"},
		{"the value itself", "p.localRateLimit", &FieldError{Msg: "m"}, "p.localRateLimit: m"},
		{"wrapped", "p", fmt.Errorf("context: %w", &FieldError{Path: "a", Msg: "m"}), "p.a: m"},
		{"a relative error", "p.cors", &relErr{"allowOrigins[1]", "m"}, "p.cors.allowOrigins[1]: m"},
		{"a relative error's index", "p.rules", &relErr{"[2]", "m"}, "p.rules[2]: m"},
		{"a relative error about the value", "p.cors", &relErr{"", "m"}, "p.cors: m"},
		{"any other error", "p.cors", errors.New("x: m"), "p.cors: x: m"},
		{"under the root", "", &FieldError{Path: "[0].a", Msg: "m"}, "[0].a: m"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := Under(tc.path, tc.err)
			if got.Error() != tc.want || got.Line != 0 {
				t.Errorf("Under(%q, %v) = %q (line %d), want %q without a position", tc.path, tc.err, got.Error(), got.Line, tc.want)
			}
		})
	}
}

// TestErrorClipsLongValues: a value longer than maxShownValue bytes, quoted
// or not, in the message or the path, is shown cut, with its length; the
// error keeps it whole. Shorter values, and long messages of short words,
// are shown as they are.
func TestErrorClipsLongValues(t *testing.T) {
	a128 := strings.Repeat("a", 128)
	for _, tc := range []struct {
		desc string
		err  *FieldError
		want string
	}{
		{
			"a quoted value (a hostname of a megabyte)",
			&FieldError{Path: "binds[0].listeners[0].hostname", Msg: fmt.Sprintf("invalid hostname %q: hostname longer than 253 bytes", strings.Repeat("a", 1<<20)), Line: 4, Col: 15},
			`binds[0].listeners[0].hostname: invalid hostname "` + a128 + `..." (1048576 bytes): hostname longer than 253 bytes (line 4:15)`,
		},
		{
			"a number of 100,000 digits",
			&FieldError{Path: "binds[0].port", Msg: "number " + strings.Repeat("9", 100000) + " is out of range [0, 65535]"},
			"binds[0].port: number " + strings.Repeat("9", 128) + "... (100000 bytes) is out of range [0, 65535]",
		},
		{
			"a long key in the path and the message",
			&FieldError{Path: "binds[0]." + strings.Repeat("p", 300), Msg: fmt.Sprintf("unknown field %q", strings.Repeat("p", 300))},
			"binds[0]." + strings.Repeat("p", 128) + `... (300 bytes): unknown field "` + strings.Repeat("p", 128) + `..." (300 bytes)`,
		},
		{
			"a quoted key in the path",
			&FieldError{Path: `headers["` + strings.Repeat("a b", 100) + `"].value`, Msg: "m"},
			`headers["` + strings.Repeat("a b", 42) + `a ..." (300 bytes)].value: m`,
		},
		{
			"a quoted value cut between characters, not inside one",
			&FieldError{Msg: fmt.Sprintf("bad %q", strings.Repeat("é", 100))},
			`(root): bad "` + strings.Repeat("é", 64) + `..." (200 bytes)`,
		},
		{
			"a quoted value cut between escapes, counted unquoted",
			&FieldError{Msg: fmt.Sprintf("bad %q", strings.Repeat("\x00", 200))},
			`(root): bad "` + strings.Repeat(`\x00`, 128) + `..." (200 bytes)`,
		},
		{
			"an unquoted value cut between characters",
			&FieldError{Msg: "bad " + strings.Repeat("é", 100)},
			"(root): bad " + strings.Repeat("é", 64) + "... (200 bytes)",
		},
		{
			"values at the bound are whole",
			&FieldError{Path: "a." + a128, Msg: fmt.Sprintf("bad %q and %s", a128, a128)},
			"a." + a128 + `: bad "` + a128 + `" and ` + a128,
		},
		{
			"a long message of short words is whole",
			&FieldError{Path: strings.Repeat("[0]", 64), Msg: "must be one of: " + strings.Repeat("value, ", 40) + `"x", "y"`},
			strings.Repeat("[0]", 64) + ": must be one of: " + strings.Repeat("value, ", 40) + `"x", "y"`,
		},
		{
			"an unclosed quote",
			&FieldError{Msg: `bad "` + strings.Repeat("a", 200)},
			`(root): bad "` + a128 + "... (200 bytes)",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			msg := tc.err.Msg
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if tc.err.Msg != msg {
				t.Error("Error changed Msg")
			}
		})
	}
}
