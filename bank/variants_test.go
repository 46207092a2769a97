package bank

import (
	"bytes"
	"encoding"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// textVariant is one of the bank's variant types, through a pointer.
type textVariant interface {
	encoding.TextMarshaler
	encoding.TextUnmarshaler
	fmt.Stringer
	Names() []string
}

// variantValues returns a fresh pointer to each variant type's zero value,
// the type's name and its names in value order (the configuration's
// spelling).
func variantValues() []struct {
	v     func() textVariant
	typ   string
	names []string
} {
	return []struct {
		v     func() textVariant
		typ   string
		names []string
	}{
		{func() textVariant { return new(Ordering) }, "Ordering", []string{"mean", "max", "source"}},
		{func() textVariant { return new(Baselines) }, "Baselines", []string{"frozen", "refresh"}},
		{func() textVariant { return new(Eviction) }, "Eviction", []string{"mandatory-densest", "densest", "mandatory-source"}},
		{func() textVariant { return new(Prefix) }, "Prefix", []string{"shared", "per-head"}},
		{func() textVariant { return new(Admission) }, "Admission", []string{"joint", "sequential"}},
		{func() textVariant { return new(Payload) }, "Payload", []string{"bf16", "f32"}},
		{func() textVariant { return new(DType) }, "DType", []string{"f32", "bf16", "f64"}},
		{func() textVariant { return new(Descriptor) }, "Descriptor", []string{"post-rope-key", "pre-rope-key", "key-value", "pre-rope-key-value"}},
	}
}

// set stores the value i in the variant v points to.
func set(v textVariant, i uint8) {
	switch p := v.(type) {
	case *Ordering:
		*p = Ordering(i)
	case *Baselines:
		*p = Baselines(i)
	case *Eviction:
		*p = Eviction(i)
	case *Prefix:
		*p = Prefix(i)
	case *Admission:
		*p = Admission(i)
	case *Payload:
		*p = Payload(i)
	case *DType:
		*p = DType(i)
	case *Descriptor:
		*p = Descriptor(i)
	default:
		panic(fmt.Sprintf("set: %T", v))
	}
}

// Every variant value has one name, the configuration's, for String,
// MarshalText and UnmarshalText; an unknown name is an error naming it and
// the names allowed and leaves the value unchanged; a value without a name
// prints as Type(n) and does not marshal.
func TestVariantNames(t *testing.T) {
	for _, c := range variantValues() {
		t.Run(c.typ, func(t *testing.T) {
			if got := c.v().Names(); !slices.Equal(got, c.names) {
				t.Fatalf("Names() = %q, want %q", got, c.names)
			}
			for i, name := range c.names {
				v := c.v()
				set(v, uint8(i))
				b, err := v.MarshalText()
				if err != nil || string(b) != name || v.String() != name {
					t.Fatalf("value %d: MarshalText %q %v, String %q; want %q", i, b, err, v.String(), name)
				}
				back := c.v()
				set(back, uint8(len(c.names)-1-i))
				if err := back.UnmarshalText([]byte(name)); err != nil || back.String() != name {
					t.Fatalf("UnmarshalText(%q): %v, got %v", name, err, back)
				}
			}
			for _, bad := range []string{"", "median", strings.ToUpper(c.names[0]), " " + c.names[0], c.names[0] + "+"} {
				v := c.v()
				set(v, 1)
				before := v.String()
				err := v.UnmarshalText([]byte(bad))
				if err == nil || v.String() != before {
					t.Fatalf("UnmarshalText(%q): err %v, value %v (was %v)", bad, err, v, before)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "bank: unknown ") || !strings.Contains(msg, fmt.Sprintf("%q", bad)) || !strings.Contains(msg, c.names[len(c.names)-1]) {
					t.Fatalf("UnmarshalText(%q): message %q does not name the value and the names allowed", bad, msg)
				}
			}
			v := c.v()
			set(v, uint8(len(c.names)))
			if want := fmt.Sprintf("%s(%d)", c.typ, len(c.names)); v.String() != want {
				t.Fatalf("String of a value without a name = %q, want %q", v.String(), want)
			}
			if b, err := v.MarshalText(); err == nil {
				t.Fatalf("MarshalText of a value without a name = %q", b)
			}
		})
	}
}

func TestDescriptorAndPayloadProperties(t *testing.T) {
	for _, c := range []struct {
		d         Descriptor
		dim       int
		vals, pre bool
	}{
		{DescPostRoPEKey, 0, false, false},
		{DescPreRoPEKey, 16, false, true},
		{DescKeyValue, 32, true, false},
		{DescPreRoPEKeyValue, 32, true, true},
	} {
		if c.d.Dim(16) != c.dim || c.d.WithValues() != c.vals || c.d.PreRoPE() != c.pre {
			t.Errorf("%v: Dim %d WithValues %v PreRoPE %v", c.d, c.d.Dim(16), c.d.WithValues(), c.d.PreRoPE())
		}
	}
	if PayloadBF16.DType() != BF16 || PayloadF32.DType() != F32 {
		t.Errorf("payload dtypes %v %v", PayloadBF16.DType(), PayloadF32.DType())
	}
	if (Config{}).Payload != PayloadBF16 || DefaultConfig().Payload != PayloadBF16 {
		t.Error("the zero payload is not the paper's bf16")
	}
}

// FuzzVariantText feeds arbitrary text to every variant type's
// UnmarshalText: it never panics, a name it takes marshals back to the same
// text, and an error leaves the value as it was.
func FuzzVariantText(f *testing.F) {
	for _, c := range variantValues() {
		for _, n := range c.names {
			f.Add([]byte(n))
		}
	}
	f.Add([]byte("mandatory+densest"))
	f.Add([]byte{0xff, 0})
	f.Fuzz(func(t *testing.T, text []byte) {
		for _, c := range variantValues() {
			v := c.v()
			set(v, 1)
			before := v.String()
			if err := v.UnmarshalText(text); err != nil {
				if v.String() != before {
					t.Fatalf("%s: failed UnmarshalText(%q) changed the value to %v", c.typ, text, v)
				}
				continue
			}
			b, err := v.MarshalText()
			if err != nil || !bytes.Equal(b, text) {
				t.Fatalf("%s: UnmarshalText(%q) then MarshalText = %q, %v", c.typ, text, b, err)
			}
		}
	})
}
