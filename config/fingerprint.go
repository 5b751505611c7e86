package config

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
	"reflect"
	"slices"
	"strings"
)

// Fingerprint is a digest of v as the file gave it: every exported field
// (and embedded struct) that JSON would write, `json:"-"` left out, with
// every value in full. MarshalJSON methods are not used: they redact
// secrets for /config_dump, and what outlives a reload (a provider set,
// an MCP backend's sessions, a limiter's buckets) is kept on a key of its
// config, so a key from the redacted JSON would keep the old one when only
// a secret changed (a rotated key, a new Authorization value). Map entries
// are taken in key order; strings and slices carry their lengths, so no
// two values run together.
func Fingerprint(v any) string { return digest(reflect.ValueOf(v)) }

func digest(v reflect.Value) string {
	h := sha256.New()
	fingerprint(h, v)
	return string(h.Sum(nil))
}

func fingerprint(h hash.Hash, v reflect.Value) {
	var num [9]byte
	writeUint := func(tag byte, n uint64) {
		num[0] = tag
		binary.LittleEndian.PutUint64(num[1:], n)
		h.Write(num[:])
	}
	switch v.Kind() {
	case reflect.Invalid:
		h.Write([]byte{'n'})
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			h.Write([]byte{'n'})
			return
		}
		h.Write([]byte{'p'})
		fingerprint(h, v.Elem())
	case reflect.Struct:
		t := v.Type()
		h.Write([]byte{'{'})
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "-" {
				continue
			}
			writeUint('f', uint64(len(f.Name)))
			h.Write([]byte(f.Name))
			fingerprint(h, v.Field(i))
		}
		h.Write([]byte{'}'})
	case reflect.Map:
		if v.IsNil() {
			h.Write([]byte{'n'})
			return
		}
		type entry struct {
			key string
			k   reflect.Value
		}
		entries := make([]entry, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			entries = append(entries, entry{digest(it.Key()), it.Key()})
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		writeUint('m', uint64(len(entries)))
		for _, e := range entries {
			h.Write([]byte(e.key))
			fingerprint(h, v.MapIndex(e.k))
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			h.Write([]byte{'n'})
			return
		}
		writeUint('[', uint64(v.Len()))
		if v.Type().Elem().Kind() == reflect.Uint8 {
			h.Write(v.Bytes())
			return
		}
		for i := range v.Len() {
			fingerprint(h, v.Index(i))
		}
	case reflect.String:
		writeUint('s', uint64(v.Len()))
		h.Write([]byte(v.String()))
	case reflect.Bool:
		b := uint64(0)
		if v.Bool() {
			b = 1
		}
		writeUint('b', b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		writeUint('i', uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		writeUint('u', v.Uint())
	case reflect.Float32, reflect.Float64:
		writeUint('d', math.Float64bits(v.Float()))
	default:
		// Functions, channels and the like hold no config: their kind
		// alone.
		writeUint('k', uint64(v.Kind()))
	}
}
