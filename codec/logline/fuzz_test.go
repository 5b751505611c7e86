package logline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// fuzzSource hands out values read from the fuzzer's bytes; once they run
// out, zeros.
type fuzzSource struct{ data []byte }

func (s *fuzzSource) byte() byte {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return b
}

func (s *fuzzSource) uint64() uint64 {
	var b [8]byte
	n := copy(b[:], s.data)
	s.data = s.data[n:]
	return binary.LittleEndian.Uint64(b[:])
}

// bytes returns up to 63 raw bytes: escapes and invalid UTF-8 come from
// the fuzzer.
func (s *fuzzSource) bytes() []byte {
	n := min(int(s.byte()%64), len(s.data))
	b := s.data[:n:n]
	s.data = s.data[n:]
	return b
}

func (s *fuzzSource) string() string { return string(s.bytes()) }

func (s *fuzzSource) bool() bool { return s.byte()&1 == 1 }

// accessField is an added field of any type (a float from any bits:
// NaN, infinities, subnormals).
func (s *fuzzSource) accessField() AccessField {
	f := AccessField{Key: s.string(), Kind: AccessFieldKind(s.byte() % 6)}
	switch f.Kind {
	case AccessString:
		f.Value = s.string()
	case AccessInt:
		f.Int = int64(s.uint64())
	case AccessUint:
		f.Uint = s.uint64()
	case AccessFloat:
		f.Float = math.Float64frombits(s.uint64())
	case AccessBool:
		if s.bool() {
			f.Int = 1
		}
	case AccessJSON:
		// As the server makes it: encoding/json's text of a list or a map.
		b, _ := json.Marshal(map[string][]string{s.string(): {s.string(), s.string()}})
		f.Value = string(b)
	}
	return f
}

var fuzzLocations = func() []*time.Location {
	locs := []*time.Location{time.UTC, time.Local, india, brazil, oddSeconds, tinyWest, nil}
	if ny, err := time.LoadLocation("America/New_York"); err == nil {
		locs = append(locs, ny)
	}
	return locs
}()

func (s *fuzzSource) location() *time.Location {
	return fuzzLocations[int(s.byte())%len(fuzzLocations)]
}

// time returns a time near now, or anywhere in int64 seconds, in one of
// fuzzLocations (nil standing for the zero time).
func (s *fuzzSource) time() time.Time {
	loc := s.location()
	if loc == nil {
		return time.Time{}
	}
	if s.bool() {
		return stamp.Add(time.Duration(int32(s.uint64()))).In(loc)
	}
	return time.Unix(int64(s.uint64()), int64(s.uint64()%1e9)).In(loc)
}

func (s *fuzzSource) tcpAddr() *net.TCPAddr {
	if s.byte()%8 == 0 {
		return nil
	}
	ip := net.IP(s.bytes())
	switch s.byte() % 4 {
	case 0:
		ip = ip[:min(len(ip), net.IPv4len)]
	case 1:
		if len(ip) > net.IPv6len {
			ip = ip[:net.IPv6len]
		}
	case 2:
		ip = net.IPv4(s.byte(), s.byte(), s.byte(), s.byte())
	}
	a := &net.TCPAddr{IP: ip, Port: int(int64(s.uint64()) >> (s.byte() % 64))}
	if s.byte()%4 == 0 {
		a.Zone = s.string()
	}
	return a
}

func (s *fuzzSource) error() error {
	msg := s.string()
	switch s.byte() % 7 {
	case 0:
		return (*nilError)(nil)
	case 1:
		return panicError{}
	case 2:
		return groupError{errors.New(msg), nil, richError{s.string(), s.string()}}
	case 3:
		return richError{msg, s.string()}
	case 4:
		return errors.Join(errors.New(msg), errors.New(s.string()))
	case 5:
		return &nilError{msg}
	}
	return errors.New(msg)
}

func (s *fuzzSource) stringer() fmt.Stringer {
	switch s.byte() % 6 {
	case 5:
		return nil
	case 0:
		return (*nilStringer)(nil)
	case 1:
		msg := s.string()
		return stringerFunc(func() string { panic(msg) })
	case 2:
		return time.Duration(s.uint64())
	case 3:
		return &nilStringer{s.string()}
	}
	return s.tcpAddr()
}

// fields returns up to 7 fields of every type zap has; depth bounds the
// nesting of objects and arrays.
func (s *fuzzSource) fields(depth int) []zapcore.Field {
	n := int(s.byte() % 8)
	fields := make([]zapcore.Field, 0, n)
	for range n {
		fields = append(fields, s.field(depth))
	}
	return fields
}

func (s *fuzzSource) field(depth int) zapcore.Field {
	key := s.string()
	raw := zapcore.Field{Key: key, Integer: int64(s.uint64())} // for the integer types, any bits
	switch kind := s.byte() % 32; kind {
	case 0, 1:
		return zap.String(key, s.string())
	case 2:
		return zap.ByteString(key, s.bytes())
	case 3:
		raw.Type = zapcore.Int64Type
	case 4:
		raw.Type = zapcore.Int32Type
	case 5:
		raw.Type = zapcore.Int16Type
	case 6:
		raw.Type = zapcore.Int8Type
	case 7:
		raw.Type = zapcore.Uint64Type
	case 8:
		raw.Type = zapcore.Uint32Type
	case 9:
		raw.Type = zapcore.Uint16Type
	case 10:
		raw.Type = zapcore.Uint8Type
	case 11:
		raw.Type = zapcore.UintptrType
	case 12:
		raw.Type = zapcore.BoolType
		raw.Integer &= 3
	case 13:
		raw.Type = zapcore.Float64Type
	case 14:
		raw.Type = zapcore.Float32Type
		raw.Integer &= math.MaxUint32
	case 15:
		raw.Type = zapcore.DurationType
	case 16:
		return zap.Time(key, s.time())
	case 17:
		if loc := s.location(); loc != nil {
			return zapcore.Field{Key: key, Type: zapcore.TimeType, Integer: raw.Integer, Interface: loc}
		}
		return zapcore.Field{Key: key, Type: zapcore.TimeType, Integer: raw.Integer}
	case 18:
		return zap.Stringer(key, s.tcpAddr())
	case 19:
		return zap.Stringer(key, s.stringer())
	case 20:
		return zap.NamedError(key, s.error())
	case 21:
		return zap.Namespace(key)
	case 22:
		return zap.Skip()
	case 23:
		return zap.Binary(key, s.bytes())
	case 24:
		return zap.Complex128(key, complex(math.Float64frombits(s.uint64()), math.Float64frombits(s.uint64())))
	case 25:
		return zap.Complex64(key, complex(math.Float32frombits(uint32(s.uint64())), math.Float32frombits(uint32(s.uint64()))))
	case 26:
		return zap.Object(key, s.object(depth))
	case 27:
		return zap.Array(key, s.array(depth))
	case 28:
		return zap.Inline(s.object(depth))
	case 29:
		return zap.Any(key, map[string]any{s.string(): s.string(), "n": math.Float64frombits(s.uint64())})
	default:
		return zap.Any(key, s.string())
	}
	return raw
}

// object returns an object of random fields, opening namespaces too.
func (s *fuzzSource) object(depth int) zapcore.ObjectMarshaler {
	var fields []zapcore.Field
	if depth < 3 {
		fields = s.fields(depth + 1)
	}
	fail := s.byte()%8 == 0
	return object(func(enc zapcore.ObjectEncoder) error {
		for _, f := range fields {
			f.AddTo(enc)
		}
		if fail {
			return errors.New("marshal failed")
		}
		return nil
	})
}

// array returns an array of up to 7 elements of random types.
func (s *fuzzSource) array(depth int) zapcore.ArrayMarshaler {
	type appendFunc func(zapcore.ArrayEncoder)
	var elems []appendFunc
	for range s.byte() % 8 {
		u := s.uint64()
		str := s.bytes()
		var nested zapcore.ObjectMarshaler
		var inner zapcore.ArrayMarshaler
		kind := s.byte() % 14
		if depth < 3 && kind == 12 {
			nested = s.object(depth + 1)
		}
		if depth < 3 && kind == 13 {
			inner = s.array(depth + 1)
		}
		elems = append(elems, func(enc zapcore.ArrayEncoder) {
			switch kind {
			case 0:
				enc.AppendBool(u&1 == 1)
			case 1:
				enc.AppendByteString(str)
			case 2:
				enc.AppendString(string(str))
			case 3:
				enc.AppendInt64(int64(u))
			case 4:
				enc.AppendUint64(u)
			case 5:
				enc.AppendFloat64(math.Float64frombits(u))
			case 6:
				enc.AppendFloat32(math.Float32frombits(uint32(u)))
			case 7:
				enc.AppendDuration(time.Duration(u))
			case 8:
				enc.AppendTime(time.Unix(0, int64(u)).In(india))
			case 9:
				enc.AppendComplex64(complex(math.Float32frombits(uint32(u)), math.Float32frombits(uint32(u>>32))))
			case 10:
				_ = enc.AppendReflected([]string{string(str)})
			case 11:
				enc.AppendInt8(int8(u))
			case 12:
				if nested != nil {
					_ = enc.AppendObject(nested)
				}
			case 13:
				if inner != nil {
					_ = enc.AppendArray(inner)
				}
			}
		})
	}
	return array(func(enc zapcore.ArrayEncoder) error {
		for _, e := range elems {
			e(enc)
		}
		return nil
	})
}

func (s *fuzzSource) entry() zapcore.Entry {
	ent := zapcore.Entry{
		Level:      zapcore.Level(int8(s.byte())%10 - 2),
		Time:       s.time(),
		LoggerName: s.string(),
		Message:    s.string(),
	}
	if s.bool() {
		ent.Caller = zapcore.NewEntryCaller(0, s.string(), int(int32(s.uint64())), true)
	}
	if s.byte()%4 == 0 {
		ent.Stack = s.string()
	}
	return ent
}

// FuzzEncodersMatchZap builds an entry, context fields (a logger's With)
// and fields of every zap type from the fuzzer's bytes and requires both
// our encoders to write what zap's write.
func FuzzEncodersMatchZap(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x00\x05level\x06access\x07request\x00\x00\x03\x05\x00key\x00\xff\xfe\"\\\n"))
	f.Add([]byte("\x02\x00\x01\x10\x08\xe6\x97\xa5\xed\xa0\x80\x41\x01\x1a\x03obj\x05\x15\x03ns\x00\x12\x02\x00"))
	for i := range 32 {
		f.Add([]byte{1, 3, byte(i), 4, 'a', 'b', 'c', 'd', 0, 0, 2, 3, 'k', 'e', 'y', byte(i), 0xff, 0x80, 7, 1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &fuzzSource{data: data}
		ent := src.entry()
		context := src.fields(0)
		fields := src.fields(0)
		requireSameAsZap(t, context, ent, fields)
	})
}
