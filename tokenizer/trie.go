package tokenizer

import (
	"sort"
)

// pieceTrie is a byte trie over the vocabulary, the lookup structure of the
// Viterbi search (sentencepiece uses a darts-clone double array built from
// the sorted pieces; the walk is the same: one byte at a time, a value where a
// piece ends).
type pieceTrie struct {
	root  [256]int32 // child of the root by byte, -1 for none
	nodes []trieNode // nodes[0] is the root
	edges []trieEdge // the children of each node, sorted by label
}

type trieNode struct {
	id    int32 // piece id ending here, -1 for none
	first int32 // the node's children are edges[first : first+n]
	n     int32
}

type trieEdge struct {
	label byte
	child int32
}

// newPieceTrie builds the trie of the keys of ids.
func newPieceTrie(ids map[string]int32) *pieceTrie {
	keys := make([]string, 0, len(ids))
	for k := range ids {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := &pieceTrie{}
	t.nodes = append(t.nodes, trieNode{id: -1})
	t.build(0, keys, 0, ids)
	for i := range t.root {
		t.root[i] = -1
	}
	r := t.nodes[0]
	for _, e := range t.edges[r.first : r.first+r.n] {
		t.root[e.label] = e.child
	}
	return t
}

// build fills node, whose keys (sorted, sharing their first depth bytes)
// are keys.
func (t *pieceTrie) build(node int32, keys []string, depth int, ids map[string]int32) {
	if len(keys) > 0 && len(keys[0]) == depth {
		t.nodes[node].id = ids[keys[0]]
		keys = keys[1:]
	}
	// Group the remaining keys by their byte at depth.
	type group struct {
		label byte
		keys  []string
	}
	var groups []group
	for lo := 0; lo < len(keys); {
		c := keys[lo][depth]
		hi := lo + 1
		for hi < len(keys) && keys[hi][depth] == c {
			hi++
		}
		groups = append(groups, group{c, keys[lo:hi]})
		lo = hi
	}
	first := int32(len(t.edges))
	t.nodes[node].first, t.nodes[node].n = first, int32(len(groups))
	for _, g := range groups {
		t.nodes = append(t.nodes, trieNode{id: -1})
		t.edges = append(t.edges, trieEdge{label: g.label, child: int32(len(t.nodes) - 1)})
	}
	for i, g := range groups {
		t.build(t.edges[first+int32(i)].child, g.keys, depth+1, ids)
	}
}

// child returns the child of node by byte c, or -1.
func (t *pieceTrie) child(node int32, c byte) int32 {
	if node == 0 {
		return t.root[c]
	}
	nd := t.nodes[node]
	es := t.edges[nd.first : nd.first+nd.n]
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].label < c {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(es) && es[lo].label == c {
		return es[lo].child
	}
	return -1
}

// longestPrefix returns the length of the longest key that prefixes s, or 0.
func (t *pieceTrie) longestPrefix(s string) int {
	node, best := int32(0), 0
	for i := 0; i < len(s); i++ {
		if node = t.child(node, s[i]); node < 0 {
			break
		}
		if t.nodes[node].id >= 0 {
			best = i + 1
		}
	}
	return best
}
