package logline

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"reflect"
	"strconv"
	"time"

	"go.uber.org/zap/zapcore"
)

// fieldWriter appends fields as JSON, byte for byte as zap's JSON encoder
// writes them: the same separators, escapes and number forms. It is a
// zapcore.ObjectEncoder and zapcore.ArrayEncoder, so that a field of any
// type can add itself (zapcore.Field.AddTo) when addField has no fast path
// for it.
type fieldWriter struct {
	bs []byte
	// spaced writes ", " and ": " as zap's console encoder does in its
	// {…} part, instead of "," and ":".
	spaced bool
	// namespaces counts the namespaces opened (OpenNamespace) and not yet
	// closed; the line closes them after its last field.
	namespaces int
}

// addFields writes fields in order.
func (w *fieldWriter) addFields(fields []zapcore.Field) {
	for i := range fields {
		w.addField(&fields[i])
	}
}

// addField writes one field. The types the gateway logs are written here
// directly; any other type goes through zap's own dispatch (addOther).
// Every case does what zapcore.Field.AddTo does with the value, including
// the conversions (an Int16 field's Integer is cut to 16 bits).
func (w *fieldWriter) addField(f *zapcore.Field) {
	switch f.Type {
	case zapcore.StringType:
		w.key(f.Key)
		w.bs = appendQuoted(w.bs, f.String)
	case zapcore.ByteStringType:
		w.key(f.Key)
		w.bs = appendQuoted(w.bs, f.Interface.([]byte))
	case zapcore.Int64Type:
		w.addInt(f.Key, f.Integer)
	case zapcore.Int32Type:
		w.addInt(f.Key, int64(int32(f.Integer)))
	case zapcore.Int16Type:
		w.addInt(f.Key, int64(int16(f.Integer)))
	case zapcore.Int8Type:
		w.addInt(f.Key, int64(int8(f.Integer)))
	case zapcore.Uint64Type, zapcore.UintptrType:
		w.addUint(f.Key, uint64(f.Integer))
	case zapcore.Uint32Type:
		w.addUint(f.Key, uint64(uint32(f.Integer)))
	case zapcore.Uint16Type:
		w.addUint(f.Key, uint64(uint16(f.Integer)))
	case zapcore.Uint8Type:
		w.addUint(f.Key, uint64(uint8(f.Integer)))
	case zapcore.BoolType:
		w.key(f.Key)
		w.bs = strconv.AppendBool(w.bs, f.Integer == 1)
	case zapcore.Float64Type:
		w.key(f.Key)
		w.bs = appendFloat(w.bs, math.Float64frombits(uint64(f.Integer)), 64)
	case zapcore.Float32Type:
		w.key(f.Key)
		w.bs = appendFloat(w.bs, float64(math.Float32frombits(uint32(f.Integer))), 32)
	case zapcore.DurationType:
		w.key(f.Key)
		w.bs = appendSeconds(w.bs, time.Duration(f.Integer))
	case zapcore.TimeType:
		w.key(f.Key)
		if f.Interface != nil {
			w.bs = appendQuotedTime(w.bs, time.Unix(0, f.Integer).In(f.Interface.(*time.Location)))
		} else {
			w.bs = appendQuotedTime(w.bs, time.Unix(0, f.Integer))
		}
	case zapcore.TimeFullType:
		w.key(f.Key)
		w.bs = appendQuotedTime(w.bs, f.Interface.(time.Time))
	case zapcore.StringerType:
		w.addStringer(f)
	case zapcore.ErrorType:
		w.addError(f)
	case zapcore.NamespaceType:
		w.OpenNamespace(f.Key)
	case zapcore.SkipType:
	default:
		w.addOther(f)
	}
}

func (w *fieldWriter) addInt(k string, v int64) {
	w.key(k)
	w.bs = appendInt(w.bs, v)
}

func (w *fieldWriter) addUint(k string, v uint64) {
	w.key(k)
	w.bs = strconv.AppendUint(w.bs, v, 10)
}

// addOther lets zap add a field of a type addField has no fast path for
// (objects, arrays, inline objects, reflected values, binary, complex
// numbers, rich errors). The field's code receives this writer as an
// interface, which would move it to the heap; a copy goes there instead,
// so that the common fields keep the writer on the stack.
func (w *fieldWriter) addOther(f *zapcore.Field) {
	escaped := new(fieldWriter)
	*escaped = *w
	f.AddTo(escaped)
	*w = *escaped
}

// addStringer writes a Stringer field as zap does: String's result, "<nil>"
// when String panics on a nil pointer, the panic under key+"Error"
// otherwise. A *net.TCPAddr (the access log's client address) is written
// without calling String, which allocates twice.
func (w *fieldWriter) addStringer(f *zapcore.Field) {
	if addr, ok := f.Interface.(*net.TCPAddr); ok {
		var text [64]byte
		w.key(f.Key)
		w.bs = appendQuoted(w.bs, appendTCPAddr(text[:0], addr))
		return
	}
	s, recovered := callString(f.Interface)
	if recovered != nil {
		w.addPanic(f.Key, f.Interface, recovered)
		return
	}
	w.key(f.Key)
	w.bs = appendQuoted(w.bs, s)
}

// addError writes an error field as zap does: its message, with the same
// handling of a panicking Error. Error groups (an Errors method) and
// fmt.Formatters get more from zap (the causes, the "%+v" text), so zap
// writes those.
func (w *fieldWriter) addError(f *zapcore.Field) {
	err := f.Interface.(error)
	switch err.(type) {
	case interface{ Errors() []error }, fmt.Formatter:
		w.addOther(f)
		return
	}
	s, recovered := callError(err)
	if recovered != nil {
		w.addPanic(f.Key, err, recovered)
		return
	}
	w.AddString(f.Key, s)
}

// addPanic writes what zap writes when a field's String or Error method
// panicked: "<nil>" for a nil pointer, else the panic under key+"Error".
func (w *fieldWriter) addPanic(key string, value, recovered any) {
	if v := reflect.ValueOf(value); v.Kind() == reflect.Pointer && v.IsNil() {
		w.AddString(key, "<nil>")
		return
	}
	w.AddString(key+"Error", fmt.Sprintf("PANIC=%v", recovered))
}

// callString returns v's String, or what it panicked with. As in zap, a
// value that is no Stringer (a nil one, say) panics here too.
func callString(v any) (text string, recovered any) {
	defer func() { recovered = recover() }()
	return v.(fmt.Stringer).String(), nil
}

func callError(err error) (text string, recovered any) {
	defer func() { recovered = recover() }()
	return err.Error(), nil
}

// separate writes the separator that goes before a key or an array
// element.
func (w *fieldWriter) separate() { w.bs = appendSeparator(w.bs, w.spaced) }

// key writes the separator and the key.
func (w *fieldWriter) key(k string) { w.bs = appendKey(w.bs, k, w.spaced) }

// appendSeparator appends ',' (", " spaced) unless bs is empty or ends
// where none belongs: after an opening bracket, a key or a separator. zap
// decides by the last byte written, and so must this.
func appendSeparator(bs []byte, spaced bool) []byte {
	if len(bs) == 0 {
		return bs
	}
	switch bs[len(bs)-1] {
	case '{', '[', ':', ',', ' ':
		return bs
	}
	if spaced {
		return append(bs, ',', ' ')
	}
	return append(bs, ',')
}

// appendKey appends the separator and `"key":` (`"key": ` spaced).
func appendKey(bs []byte, k string, spaced bool) []byte {
	bs = append(appendSeparator(bs, spaced), '"')
	bs = appendEscaped(bs, k)
	if spaced {
		return append(bs, '"', ':', ' ')
	}
	return append(bs, '"', ':')
}

// appendQuoted appends s as a JSON string.
func appendQuoted[S string | []byte](bs []byte, s S) []byte {
	bs = append(bs, '"')
	bs = appendEscaped(bs, s)
	return append(bs, '"')
}

// appendQuotedTime appends t as zapcore.ISO8601TimeEncoder writes it, in
// quotes (it needs no escapes).
func appendQuotedTime(bs []byte, t time.Time) []byte {
	bs = append(bs, '"')
	bs = seconds.appendTime(bs, t, false)
	return append(bs, '"')
}

// closeNamespaces closes the namespaces left open.
func (w *fieldWriter) closeNamespaces() {
	for ; w.namespaces > 0; w.namespaces-- {
		w.bs = append(w.bs, '}')
	}
}

// appendFloat appends a float as zap does: the shortest decimal that reads
// back as the same float of bitSize bits, never an exponent, and the
// strings "NaN", "+Inf" and "-Inf" for what JSON numbers cannot hold.
func appendFloat(bs []byte, v float64, bitSize int) []byte {
	switch {
	case math.IsNaN(v):
		return append(bs, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(bs, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(bs, `"-Inf"`...)
	}
	return strconv.AppendFloat(bs, v, 'f', -1, bitSize)
}

// exactSecondsBelow bounds the durations appendSeconds writes from their
// integer: below 10^15 ns a duration has at most 15 significant digits and
// float64(d) is exact, so the float zap writes, float64(d)/1e9 correctly
// rounded, is the float nearest to the decimal d/1e9, and no other decimal
// of 15 digits or fewer lies as near (they are 10^-15 of its size apart, a
// float's rounding interval is 2.2x10^-16 of it): the shortest decimal that
// reads back as that float is d/1e9 itself.
const exactSecondsBelow = 1e15

// appendSeconds appends d in seconds as zap's SecondsDurationEncoder does
// (appendFloat of float64(d)/1e9), from the integer when that gives the
// same digits (see exactSecondsBelow): "0.000087", "-1.5", "3600".
func appendSeconds(bs []byte, d time.Duration) []byte {
	if d <= -exactSecondsBelow || d >= exactSecondsBelow {
		return appendFloat(bs, float64(d)/float64(time.Second), 64)
	}
	if d < 0 {
		bs = append(bs, '-')
		d = -d
	}
	bs = appendInt(bs, int64(d/time.Second))
	if nanos := uint32(d % time.Second); nanos != 0 {
		bs = appendFraction(bs, nanos)
	}
	return bs
}

// appendComplex appends a complex number as zap does: a string of its two
// parts (each at precision bits), "+" before an imaginary part that is not
// negative (zap's test: so NaN gets none and -0 gets one), and "i".
func appendComplex(bs []byte, v complex128, precision int) []byte {
	re, im := real(v), imag(v)
	bs = append(bs, '"')
	bs = strconv.AppendFloat(bs, re, 'f', -1, precision)
	if im >= 0 {
		bs = append(bs, '+')
	}
	bs = strconv.AppendFloat(bs, im, 'f', -1, precision)
	return append(bs, 'i', '"')
}

// reflected returns value as zap's default reflected encoder writes it:
// encoding/json without HTML escaping, its trailing newline removed.
func reflected(value any) ([]byte, error) {
	if value == nil {
		return []byte("null"), nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte{'\n'}), nil
}

// zapcore.ObjectEncoder: each Add writes the key, then the value as the
// matching Append does. addField writes the common types itself.

func (w *fieldWriter) AddArray(k string, v zapcore.ArrayMarshaler) error {
	w.key(k)
	return w.AppendArray(v)
}

func (w *fieldWriter) AddObject(k string, v zapcore.ObjectMarshaler) error {
	w.key(k)
	return w.AppendObject(v)
}

// AddBinary writes v in standard base64, as zap does.
func (w *fieldWriter) AddBinary(k string, v []byte) {
	w.key(k)
	w.bs = append(w.bs, '"')
	w.bs = base64.StdEncoding.AppendEncode(w.bs, v)
	w.bs = append(w.bs, '"')
}

func (w *fieldWriter) AddReflected(k string, v any) error { return w.addReflected(k, true, v) }
func (w *fieldWriter) AddByteString(k string, v []byte)   { w.key(k); w.AppendByteString(v) }
func (w *fieldWriter) AddBool(k string, v bool)           { w.key(k); w.AppendBool(v) }
func (w *fieldWriter) AddComplex128(k string, v complex128) {
	w.key(k)
	w.AppendComplex128(v)
}
func (w *fieldWriter) AddComplex64(k string, v complex64)    { w.key(k); w.AppendComplex64(v) }
func (w *fieldWriter) AddDuration(k string, v time.Duration) { w.key(k); w.AppendDuration(v) }
func (w *fieldWriter) AddFloat64(k string, v float64)        { w.key(k); w.AppendFloat64(v) }
func (w *fieldWriter) AddFloat32(k string, v float32)        { w.key(k); w.AppendFloat32(v) }
func (w *fieldWriter) AddInt(k string, v int)                { w.key(k); w.AppendInt64(int64(v)) }
func (w *fieldWriter) AddInt64(k string, v int64)            { w.key(k); w.AppendInt64(v) }
func (w *fieldWriter) AddInt32(k string, v int32)            { w.key(k); w.AppendInt64(int64(v)) }
func (w *fieldWriter) AddInt16(k string, v int16)            { w.key(k); w.AppendInt64(int64(v)) }
func (w *fieldWriter) AddInt8(k string, v int8)              { w.key(k); w.AppendInt64(int64(v)) }
func (w *fieldWriter) AddString(k, v string)                 { w.key(k); w.AppendString(v) }
func (w *fieldWriter) AddTime(k string, v time.Time)         { w.key(k); w.AppendTime(v) }
func (w *fieldWriter) AddUint(k string, v uint)              { w.key(k); w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AddUint64(k string, v uint64)          { w.key(k); w.AppendUint64(v) }
func (w *fieldWriter) AddUint32(k string, v uint32)          { w.key(k); w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AddUint16(k string, v uint16)          { w.key(k); w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AddUint8(k string, v uint8)            { w.key(k); w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AddUintptr(k string, v uintptr)        { w.key(k); w.AppendUint64(uint64(v)) }

// zapcore.ArrayEncoder: each Append writes a separator (none after a key),
// then the value.

func (w *fieldWriter) AppendReflected(v any) error { return w.addReflected("", false, v) }
func (w *fieldWriter) AppendInt(v int)             { w.AppendInt64(int64(v)) }
func (w *fieldWriter) AppendInt32(v int32)         { w.AppendInt64(int64(v)) }
func (w *fieldWriter) AppendInt16(v int16)         { w.AppendInt64(int64(v)) }
func (w *fieldWriter) AppendInt8(v int8)           { w.AppendInt64(int64(v)) }
func (w *fieldWriter) AppendUint(v uint)           { w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AppendUint32(v uint32)       { w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AppendUint16(v uint16)       { w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AppendUint8(v uint8)         { w.AppendUint64(uint64(v)) }
func (w *fieldWriter) AppendUintptr(v uintptr)     { w.AppendUint64(uint64(v)) }

func (w *fieldWriter) AppendBool(v bool) {
	w.separate()
	w.bs = strconv.AppendBool(w.bs, v)
}

func (w *fieldWriter) AppendInt64(v int64) {
	w.separate()
	w.bs = appendInt(w.bs, v)
}

func (w *fieldWriter) AppendUint64(v uint64) {
	w.separate()
	w.bs = strconv.AppendUint(w.bs, v, 10)
}

func (w *fieldWriter) AppendFloat64(v float64) {
	w.separate()
	w.bs = appendFloat(w.bs, v, 64)
}

func (w *fieldWriter) AppendFloat32(v float32) {
	w.separate()
	w.bs = appendFloat(w.bs, float64(v), 32)
}

func (w *fieldWriter) AppendComplex128(v complex128) {
	w.separate()
	w.bs = appendComplex(w.bs, v, 64)
}

func (w *fieldWriter) AppendComplex64(v complex64) {
	w.separate()
	w.bs = appendComplex(w.bs, complex128(v), 32)
}

func (w *fieldWriter) AppendDuration(v time.Duration) {
	w.separate()
	w.bs = appendSeconds(w.bs, v)
}

func (w *fieldWriter) AppendString(v string) {
	w.separate()
	w.bs = appendQuoted(w.bs, v)
}

func (w *fieldWriter) AppendByteString(v []byte) {
	w.separate()
	w.bs = appendQuoted(w.bs, v)
}

func (w *fieldWriter) AppendTime(v time.Time) {
	w.separate()
	w.bs = appendQuotedTime(w.bs, v)
}

// OpenNamespace starts an object that holds every field after it, up to the
// end of the enclosing object or line.
func (w *fieldWriter) OpenNamespace(k string) {
	w.key(k)
	w.bs = append(w.bs, '{')
	w.namespaces++
}

func (w *fieldWriter) AppendArray(v zapcore.ArrayMarshaler) error {
	w.separate()
	w.bs = append(w.bs, '[')
	err := v.MarshalLogArray(w)
	w.bs = append(w.bs, ']')
	return err
}

// AppendObject writes an object; namespaces opened inside it close with it.
func (w *fieldWriter) AppendObject(v zapcore.ObjectMarshaler) error {
	outer := w.namespaces
	w.namespaces = 0
	w.separate()
	w.bs = append(w.bs, '{')
	err := v.MarshalLogObject(w)
	w.closeNamespaces()
	w.bs = append(w.bs, '}')
	w.namespaces = outer
	return err
}

// addReflected writes a value through encoding/json (zap's default
// reflected encoder); a value it cannot encode writes nothing, and zap
// reports the error under key+"Error".
func (w *fieldWriter) addReflected(k string, withKey bool, v any) error {
	text, err := reflected(v)
	if err != nil {
		return err
	}
	if withKey {
		w.key(k)
	}
	w.separate()
	w.bs = append(w.bs, text...)
	return nil
}

var (
	_ zapcore.ObjectEncoder = (*fieldWriter)(nil)
	_ zapcore.ArrayEncoder  = (*fieldWriter)(nil)
)
