// Package vocab spells the values of small enumerations (the bank's and
// the memory policies' variants) with one name each: the text that
// String, MarshalText and UnmarshalText of those types use, so that the
// configuration, the flags, the logs and the snapshots agree.
package vocab

import (
	"fmt"
	"slices"
	"strings"
)

// List is the vocabulary of one enumeration: Names[v] is the name of value
// v. Pkg and Kind label errors ("bank", "ordering").
type List struct {
	Pkg, Kind string
	Names     []string
}

// Error reports a name that is not in a vocabulary, or a value without a
// name.
type Error struct {
	Pkg, Kind string
	Name      string   // the name read, or the value's number
	Known     []string // the names allowed
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: unknown %s %s (want %s)", e.Pkg, e.Kind, e.Name, Or(e.Known))
}

// String returns value v's name, or typ(v) for a value without one.
func (l List) String(v uint8, typ string) string {
	if int(v) < len(l.Names) {
		return l.Names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Marshal returns value v's name, or an *Error for a value without one.
func (l List) Marshal(v uint8) ([]byte, error) {
	if int(v) < len(l.Names) {
		return []byte(l.Names[v]), nil
	}
	return nil, &Error{Pkg: l.Pkg, Kind: l.Kind, Name: fmt.Sprint(v), Known: l.All()}
}

// Parse returns the value named text (exactly), or an *Error.
func (l List) Parse(text []byte) (uint8, error) {
	if i := slices.Index(l.Names, string(text)); i >= 0 {
		return uint8(i), nil
	}
	return 0, &Error{Pkg: l.Pkg, Kind: l.Kind, Name: fmt.Sprintf("%q", text), Known: l.All()}
}

// All returns a copy of the names in value order.
func (l List) All() []string { return slices.Clone(l.Names) }

// Or joins names as "a, b or c".
func Or(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
