// Package decode owns strict decoding of YAML and JSON configuration text
// into Go structs, reporting every problem at once, each with the path of
// the value and its line and column:
//
//	binds[0].listeners[1].routes[2].matches[0].path: exactly one of exact, pathPrefix, regex is required (line 14:9)
//
// Configuration types are plain structs with `json:"name,omitempty"` tags;
// YAML parses the document (github.com/goccy/go-yaml), resolves anchors,
// aliases and merge keys, and fills the value by reflection.
//
// # Decoding rules
//
//   - Struct fields are named by their json tag (or Go name); "-" is
//     skipped; untagged embedded structs are inlined as in encoding/json.
//     Names match exactly (case-sensitive). A key naming no field is an
//     error: unknown field "hostnmes" (did you mean "hostnames"?); a
//     FieldHinter may say instead why the key is not taken there.
//   - Kinds must match: `expected integer, got string "abc"`. Integers take
//     integer values, or numbers without a fraction (1e3), within the range
//     of the Go type; a quoted "123" is a string. Booleans are only true and
//     false (YAML 1.2: yes/no/on/off are strings). Strings take only
//     strings. Floats take any number. Integers with a leading zero (012)
//     are rejected as ambiguous between YAML 1.1 octal and 1.2 decimal.
//   - null means absent: pointers, maps, slices and interfaces become nil;
//     other values are left unchanged (a preset default survives). A key
//     that is present and not null allocates a pointer.
//     A list item or map value cannot be absent: null there is refused
//     ("must not be null") unless its type can be nil (pointer, map,
//     slice, interface, Raw).
//   - Lists decode into slices (and arrays of the same length), maps into
//     map[K]V with string-kind K, any value into interface{} (any) as the
//     generic values of Node.Value, into Raw as generic value plus Node,
//     and into json.RawMessage as JSON text.
//   - time.Duration takes a string in time.ParseDuration syntax ("1m30s").
//     Types implementing encoding.TextUnmarshaler (netip.Prefix, ...) take
//     a string. Types implementing Unmarshaler decode themselves.
//   - Duplicate keys are errors. Map keys must be scalars; non-string
//     scalar keys (200: ...) are taken as written.
//   - A Validator's Validate runs after its value decoded cleanly, for
//     rules that span fields; errors are placed relative to the value. A
//     Validator that is also a FieldRules (its rules each concern one
//     field) runs even when some fields failed, and its errors about
//     those fields are dropped, so one run reports every problem.
//   - Only one document is allowed. An empty (or null) document decodes to
//     nothing and is not an error. Standard tags (!!str, !!int, !!float,
//     !!bool, !!null, !!map, !!seq) are honoured; others are rejected.
//   - Merge keys (<<) take a map or a list of maps; keys written in the map
//     win over merged keys, and earlier merged maps win over later ones.
//     Merged values report the position of their definition.
//   - Maps and lists nest at most 64 levels; alias expansion creates at
//     most 100000 values; at most 1000 errors are listed. Decoding never
//     panics on any input.
//   - The parser's work is bounded before it runs, so that no document
//     takes it more than seconds: at most 500000 tokens (keys, list
//     entries, brackets, commas, quoted strings, anchors, aliases, tags,
//     comments; counted by the characters that start them), and at most
//     10000 keys in all past the first 100 of each block mapping (one key
//     per line), which the parser handles in time that grows with the
//     square of their number. Flow mappings ({...}) and JSON objects are
//     not so limited.
//
// # Field rules
//
// The `cfg:"..."` struct tag holds comma-separated rules checked after the
// field is decoded without error. Rules other than required are checked
// only when the key is present, and apply to the pointed-to value of a
// non-nil pointer.
//
//	required      key present and not null           "required"
//	min=N, max=N  numbers (Duration: "1s")           "must be >= 1", "must be <= 65535"
//	minLen=N      strings, in characters             "must be at least 3 characters"
//	maxLen=N                                         "must be at most 63 characters"
//	minItems=N    slices, arrays, maps               "must have at least 1 item"
//	maxItems=N                                       "must have at most 8 items"
//	enum=a|b|c    strings                            "must be one of: a, b, c"
//	later=d|e     with enum: values of the schema    "\"d\" is not supported yet"
//	              whose feature is not built
//	pattern=RE    strings; must be the last rule     "does not match pattern ^[a-z]+$"
//
// A malformed tag is reported as an error whenever its struct is decoded;
// CheckType finds such mistakes from a test.
//
// # Paths
//
// A path starts at the document root (""; rendered "(root)"). Fields and
// map keys append ".name", list items "[i]". A key that is empty or has
// characters other than ASCII letters, digits, '_' and '-' is written as a
// quoted string in brackets instead, so that paths stay unambiguous:
// headers.X-Foo, headers["a.b"], backends["/v1"], binds[0].port. The same
// syntax is used for the relative paths given to Validation.Errorf and
// Node.ErrorfAt.
//
// # Custom decoding
//
// A union or string-or-object type implements Unmarshaler and inspects
// the Node:
//
//	func (b *Backend) DecodeNode(n *decode.Node) {
//		if s, ok := n.String(); ok {
//			b.Host = s
//			return
//		}
//		if !n.Expect(decode.String, decode.Map) {
//			return
//		}
//		type plain Backend // no DecodeNode method: standard strict rules
//		n.Decode((*plain)(b))
//	}
//
// Node.OneOf checks exactly-one-of keys; Node.Errorf and Node.ErrorfAt
// record errors.
package decode
