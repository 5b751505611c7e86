package policy

import (
	"errors"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

// TestPrefixField: the part's error names its field below the part,
// whether a constructor returned it as a *FieldError or a
// *decode.FieldError (ratelimit's), never in the message.
func TestPrefixField(t *testing.T) {
	for _, tc := range []struct {
		desc string
		err  error
		want string
	}{
		{"a FieldError", &FieldError{Field: "name", Msg: "m"}, "conditional[0].name: m"},
		{"a FieldError's index", &FieldError{Field: "[1]", Msg: "m"}, "conditional[0][1]: m"},
		{"a decode.FieldError", &decode.FieldError{Path: "[1].maxTokens", Msg: "m"}, "conditional[0][1].maxTokens: m"},
		{"a decode.FieldError's field", &decode.FieldError{Path: "maxTokens", Msg: "m"}, "conditional[0].maxTokens: m"},
		{"any other error", errors.New("m"), "conditional[0]: m"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := PrefixField("conditional[0]", tc.err)
			var fe *FieldError
			if !errors.As(got, &fe) || got.Error() != tc.want {
				t.Errorf("PrefixField = %#v (%q), want a *FieldError %q", got, got.Error(), tc.want)
			}
		})
	}
}
