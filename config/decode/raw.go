package decode

import "encoding/json"

// Raw holds a value of any shape ("any JSON"), decoded without a schema.
// Value is the generic form (map[string]any, []any, string, int64, float64,
// bool or nil; integers above MaxInt64 are uint64) and Node the parsed
// form, for positions and for decoding later with Node.Decode during the
// same decode (from a DecodeNode or Validate method).
//
// A Raw whose key is absent has a nil Node; a null value has a Node and a
// nil Value.
type Raw struct {
	Value any
	Node  *Node
}

// IsSet reports whether the key was present in the document.
func (r Raw) IsSet() bool { return r.Node != nil }

// MarshalJSON encodes Value, so that a decoded configuration can be dumped
// as JSON.
func (r Raw) MarshalJSON() ([]byte, error) { return json.Marshal(r.Value) }
