package policy

import "fmt"

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

// fieldErrorf builds a *FieldError; it runs at configuration time only.
func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// indexed returns "field[i]".
func indexed(field string, i int) string {
	return fmt.Sprintf("%s[%d]", field, i)
}
