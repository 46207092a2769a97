package tokenizer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// spaceSymbol is U+2581 LOWER ONE EIGHTH BLOCK, "▁", which stands for a space
// in pieces.
const spaceSymbol = "\u2581"

// maxCharsmapResults is sentencepiece's Normalizer::kMaxTrieResultsSize: its
// builder guarantees no input has more matching rules than this, and Parse
// checks it.
const maxCharsmapResults = 32

// normalizer is sentencepiece's Normalizer (normalizer.cc, 0.1.97).
type normalizer struct {
	addDummyPrefix          bool
	removeExtraWhitespaces  bool
	escapeWhitespaces       bool
	treatWhitespaceAsSuffix bool

	// The precompiled charsmap: a darts-clone double array whose values are
	// offsets of NUL-terminated replacement strings in normalized. Nil units:
	// no charsmap (identity).
	units      []uint32
	normalized string

	userDefined *pieceTrie // user-defined pieces pass through unnormalized
}

func newNormalizer(spec normalizerSpec, suffix bool, userDefined map[string]int32) (*normalizer, error) {
	n := &normalizer{
		addDummyPrefix:          spec.addDummyPrefix,
		removeExtraWhitespaces:  spec.removeExtraWhitespaces,
		escapeWhitespaces:       spec.escapeWhitespaces,
		treatWhitespaceAsSuffix: suffix,
	}
	if len(userDefined) > 0 {
		n.userDefined = newPieceTrie(userDefined)
	}
	if len(spec.charsmap) == 0 {
		return n, nil
	}
	// <trie size: uint32 LE><double array: size bytes><NUL-terminated strings>
	blob := spec.charsmap
	if len(blob) <= 4 {
		return nil, fmt.Errorf("%w: precompiled_charsmap at byte %d: %d bytes, too short", ErrFormat, spec.charsmapOffset, len(blob))
	}
	size := binary.LittleEndian.Uint32(blob)
	if uint64(size) >= uint64(len(blob)) || uint64(size) > uint64(len(blob)-4) {
		return nil, fmt.Errorf("%w: precompiled_charsmap at byte %d: trie size %d exceeds the %d-byte blob", ErrFormat, spec.charsmapOffset, size, len(blob))
	}
	trie := blob[4 : 4+size]
	n.units = make([]uint32, len(trie)/4) // sentencepiece also ignores a partial last unit
	for i := range n.units {
		n.units[i] = binary.LittleEndian.Uint32(trie[4*i:])
	}
	n.normalized = string(blob[4+size:])
	if err := n.checkCharsmap(); err != nil {
		return nil, fmt.Errorf("%w: precompiled_charsmap at byte %d: %v", ErrFormat, spec.charsmapOffset, err)
	}
	return n, nil
}

// The fields of a darts-clone unit.
func dartsHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func dartsValue(u uint32) int     { return int(u & (1<<31 - 1)) }
func dartsLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func dartsOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// checkCharsmap walks every key the double array holds and checks that each
// value is the offset of a NUL-terminated string and that no key has more
// than maxCharsmapResults prefixes with values. sentencepiece reads these
// blindly; here a broken charsmap is an error at load, and lookups are also
// bounds-checked.
func (n *normalizer) checkCharsmap() error {
	if len(n.units) == 0 {
		return fmt.Errorf("empty double array")
	}
	lastNUL := strings.LastIndexByte(n.normalized, 0)
	type state struct {
		base   uint32
		leaves int
	}
	visited := make([]bool, len(n.units))
	stack := []state{{base: dartsOffset(n.units[0])}}
	keys := 0
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := uint32(0); c < 256; c++ {
			p := s.base ^ c
			if uint64(p) >= uint64(len(n.units)) || dartsLabel(n.units[p]) != c {
				continue
			}
			child := p ^ dartsOffset(n.units[p])
			if uint64(child) >= uint64(len(n.units)) {
				return fmt.Errorf("node %d points past the %d-unit array", p, len(n.units))
			}
			leaves := s.leaves
			if dartsHasLeaf(n.units[p]) {
				keys++
				leaves++
				if leaves > maxCharsmapResults {
					return fmt.Errorf("a key has more than %d matching prefixes", maxCharsmapResults)
				}
				v := dartsValue(n.units[child])
				if v >= len(n.normalized) || v > lastNUL {
					return fmt.Errorf("rule at node %d points at byte %d, past the last terminated string (%d bytes of strings)", p, v, len(n.normalized))
				}
			}
			if visited[child] {
				continue
			}
			visited[child] = true
			stack = append(stack, state{base: child, leaves: leaves})
		}
	}
	if keys == 0 {
		return fmt.Errorf("no rules")
	}
	return nil
}

// prefix is NormalizePrefix: the replacement of the longest rule matching the
// start of input and the number of input bytes it consumes. A user-defined
// piece passes through as it is; without a rule one character passes
// through, and an ill-formed UTF-8 byte becomes U+FFFD (one byte consumed).
func (n *normalizer) prefix(input string) (string, int) {
	if n.userDefined != nil {
		if l := n.userDefined.longestPrefix(input); l > 0 {
			return input[:l], l
		}
	}
	longest, value := 0, 0
	if n.units != nil {
		// commonPrefixSearch: rules match at increasing lengths; the longest of
		// the first maxCharsmapResults wins.
		results := 0
		pos := dartsOffset(n.units[0])
		for i := 0; i < len(input); i++ {
			c := uint32(input[i])
			pos ^= c
			if uint64(pos) >= uint64(len(n.units)) || dartsLabel(n.units[pos]) != c {
				break
			}
			leaf := dartsHasLeaf(n.units[pos])
			pos ^= dartsOffset(n.units[pos])
			if uint64(pos) >= uint64(len(n.units)) {
				break
			}
			if leaf {
				if results < maxCharsmapResults {
					longest, value = i+1, dartsValue(n.units[pos])
				}
				results++
			}
		}
	}
	if longest == 0 {
		r, size := utf8.DecodeRuneInString(input)
		if r == utf8.RuneError && size == 1 {
			return "\uFFFD", 1
		}
		return input[:size], size
	}
	s := n.normalized[min(value, len(n.normalized)):]
	if end := strings.IndexByte(s, 0); end >= 0 { // always, after checkCharsmap
		s = s[:end]
	}
	return s, longest
}

// normalize is Normalizer::Normalize without the alignment.
func (n *normalizer) normalize(input string) []byte {
	if input == "" {
		return nil
	}
	// Leading spaces.
	if n.removeExtraWhitespaces {
		for input != "" {
			sp, l := n.prefix(input)
			if sp != " " {
				break
			}
			input = input[l:]
		}
	}
	if input == "" {
		return nil
	}
	out := make([]byte, 0, 3*len(input))
	addWS := func() {
		if n.escapeWhitespaces {
			out = append(out, spaceSymbol...)
		} else {
			out = append(out, ' ')
		}
	}
	if !n.treatWhitespaceAsSuffix && n.addDummyPrefix {
		addWS()
	}
	isPrevSpace := n.removeExtraWhitespaces
	for input != "" {
		sp, l := n.prefix(input)
		for isPrevSpace && strings.HasPrefix(sp, " ") {
			sp = sp[1:]
		}
		if sp != "" {
			for i := 0; i < len(sp); i++ {
				if n.escapeWhitespaces && sp[i] == ' ' {
					out = append(out, spaceSymbol...)
				} else {
					out = append(out, sp[i])
				}
			}
			isPrevSpace = sp[len(sp)-1] == ' '
		}
		input = input[l:]
		if !n.removeExtraWhitespaces {
			isPrevSpace = false
		}
	}
	// Trailing spaces.
	if n.removeExtraWhitespaces {
		space := " "
		if n.escapeWhitespaces {
			space = spaceSymbol
		}
		for bytes.HasSuffix(out, []byte(space)) {
			out = out[:len(out)-len(space)]
		}
	}
	if n.treatWhitespaceAsSuffix && n.addDummyPrefix {
		addWS()
	}
	return out
}
