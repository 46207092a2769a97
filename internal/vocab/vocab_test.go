package vocab

import (
	"errors"
	"testing"
)

func TestListRoundTripAndErrors(t *testing.T) {
	l := List{Pkg: "bank", Kind: "ordering", Names: []string{"mean", "max", "source"}}
	for v, name := range l.Names {
		b, err := l.Marshal(uint8(v))
		if err != nil || string(b) != name || l.String(uint8(v), "Ordering") != name {
			t.Fatalf("value %d: %q %v", v, b, err)
		}
		back, err := l.Parse(b)
		if err != nil || back != uint8(v) {
			t.Fatalf("%q: %d %v", b, back, err)
		}
	}
	if s := l.String(7, "Ordering"); s != "Ordering(7)" {
		t.Fatalf("String(7) = %q", s)
	}
	var e *Error
	if _, err := l.Marshal(3); !errors.As(err, &e) || err.Error() != "bank: unknown ordering 3 (want mean, max or source)" {
		t.Fatalf("Marshal(3): %v", err)
	}
	for _, bad := range []string{"median", "", "MAX", " max"} {
		_, err := l.Parse([]byte(bad))
		if !errors.As(err, &e) || e.Name != `"`+bad+`"` || len(e.Known) != 3 {
			t.Fatalf("Parse(%q): %v", bad, err)
		}
	}
	if _, err := l.Parse([]byte("median")); err.Error() != `bank: unknown ordering "median" (want mean, max or source)` {
		t.Fatalf("message %q", err)
	}
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := Or(c.in); got != c.want {
			t.Errorf("Or(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
