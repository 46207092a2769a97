package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkIntegers walks a YAML document against the Go type it decodes into
// and rejects a number with a fraction (or beyond int64) for an integer
// field: yaml.v3 would truncate "heads: 3.9" to 3. Errors name the line and
// the key (with its flag).
func checkIntegers(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if leafType(t) {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		switch t.Kind() {
		case reflect.Struct:
			fields := yamlFields(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				ft, ok := fields[k.Value]
				if !ok {
					continue // unknown keys are the decoder's error
				}
				if err := checkIntegers(v, ft, join(path, k.Value)); err != nil {
					return err
				}
			}
		case reflect.Map:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := checkIntegers(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
					return err
				}
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range n.Content {
				if err := checkIntegers(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case yaml.ScalarNode:
		if !isInteger(t.Kind()) || n.ShortTag() != "!!float" {
			return nil
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || f != math.Trunc(f) || !(math.Abs(f) < 1<<63) {
			return fmt.Errorf("line %d: %s is %s, want an integer", n.Line, Named(path), n.Value)
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
)

// leafType reports a type that decodes itself (its own rules apply).
func leafType(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(textUnmarshaler) || p.Implements(yamlUnmarshaler) || t.Implements(yamlUnmarshaler)
}

// yamlFields maps the YAML keys of struct t (yaml.v3's rules: the tag's
// name, else the lowercased field name; inline structs flattened; "-"
// skipped) to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}
