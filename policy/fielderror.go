package policy

import (
	"fmt"

	"github.com/relaygate/gateway/config/decode"
)

// FieldError is a constructor's refusal of a configuration value. Field is the
// path of the offending field relative to the policy, in the file's spelling
// ("allowOrigins[1]", "set.X-Foo"); callers prefix it with where the policy sits.
type FieldError struct {
	Field string
	Msg   string
}

// Error returns "field: message".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// RelativeField returns the field, relative to the policy, and the
// message (decode.RelativeError): decode.Under puts it below the policy's
// path.
func (e *FieldError) RelativeField() (field, msg string) { return e.Field, e.Msg }

// fieldErrorf builds a *FieldError; it runs at configuration time only.
func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// indexed returns "field[i]".
func indexed(field string, i int) string {
	return fmt.Sprintf("%s[%d]", field, i)
}

// PrefixField puts field before the field err names: a constructor's
// error about a part it compiled with another constructor. err's field is
// relative to that part, whether err is a *FieldError or a
// *decode.FieldError (decode.Under); any other error becomes one about
// field.
func PrefixField(field string, err error) error {
	fe := decode.Under(field, err)
	return &FieldError{Field: fe.Path, Msg: fe.Msg}
}

// JoinField joins field paths ("a" + "b" is "a.b", "a" + "[1]" is "a[1]").
func JoinField(a, b string) string { return decode.JoinPath(a, b) }
