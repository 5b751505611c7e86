package decode

import (
	"errors"
	"fmt"
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
