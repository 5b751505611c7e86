package celrules

import (
	"encoding/json"
	"reflect"
	"strconv"

	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"
)

// JSONValue is v as JSON would hold it (maps, lists, strings, float64,
// bools, nil), or nil when v has no JSON form.
func JSONValue(v ref.Val) any {
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil
	}
	return native.(*structpb.Value).AsInterface()
}

// Text is a value as a header or a log field shows it: a string or bytes
// as they are, a number or a bool as text, anything else as JSON.
func Text(v ref.Val) string {
	return NativeText(v.Value(), v)
}

// NativeText is Text of a Go value; v, when not nil, is its CEL value for
// the JSON form.
func NativeText(x any, v ref.Val) string {
	switch x := x.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	var native any = x
	if v != nil {
		native = JSONValue(v)
	}
	b, _ := json.Marshal(native)
	return string(b)
}
