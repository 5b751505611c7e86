package llmtest_test

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// testContext bounds a test's SDK calls.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noUnknownFields fails when an SDK response value (openai-go's or
// anthropic-sdk-go's, whose structs keep the members they do not know in
// JSON.ExtraFields) holds members the SDK does not declare: a misspelt or
// invented field of the emulator's. Members named in allowed (by their last
// name) are the provider's own that its SDK leaves undeclared.
func noUnknownFields(t *testing.T, what string, v any, allowed ...string) {
	t.Helper()
	var all []string
	walkExtra(reflect.ValueOf(v), what, map[uintptr]bool{}, &all)
	var found []string
	for _, f := range all {
		if !slices.Contains(allowed, f[strings.LastIndexByte(f, '.')+1:]) {
			found = append(found, f)
		}
	}
	if len(found) > 0 {
		sort.Strings(found)
		t.Errorf("members the SDK does not know: %s", strings.Join(found, ", "))
	}
}

func walkExtra(v reflect.Value, path string, seen map[uintptr]bool, found *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		if v.Kind() == reflect.Pointer {
			if seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
		}
		walkExtra(v.Elem(), path, seen, found)
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walkExtra(v.Index(i), path+"[]", seen, found)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walkExtra(v.MapIndex(k), path+"{}", seen, found)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			if f.Name == "JSON" && fv.Kind() == reflect.Struct {
				if extra := fv.FieldByName("ExtraFields"); extra.IsValid() && extra.Kind() == reflect.Map {
					for _, k := range extra.MapKeys() {
						*found = append(*found, path+"."+k.String())
					}
				}
				continue
			}
			walkExtra(fv, path+"."+f.Name, seen, found)
		}
	}
}
