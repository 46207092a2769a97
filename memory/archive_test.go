package memory

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameCalls runs blocks [from, to) of s through a and b (two steps each,
// the second clean) and fails unless every context and the bytes agree.
func sameCalls(t *testing.T, sa, sb *stream, a, b Policy, from, to int) {
	t.Helper()
	for blk := from; blk < to; blk++ {
		for st := 0; st <= 1; st++ {
			c := Call{Block: blk, Step: st, First: st == 0, Clean: st == 1}
			ca, _ := sa.call(t, a, c)
			cb, _ := sb.call(t, b, c)
			for l := range ca {
				if ca[l].Parts != cb[l].Parts || !equal(ca[l].K, cb[l].K) || !equal(ca[l].V, cb[l].V) || !equal(ca[l].Q, cb[l].Q) {
					t.Fatalf("block %d step %d layer %d: contexts differ (%+v vs %+v)", blk, st, l, ca[l].Parts, cb[l].Parts)
				}
			}
		}
		if a.Bytes() != b.Bytes() {
			t.Fatalf("block %d: bytes %d vs %d", blk, a.Bytes(), b.Bytes())
		}
	}
}

// TestArchiveIsIdentical: FullHistory and LongLive-RAG with their frames in
// an archive file give the in-memory policies' contexts and bytes bit for
// bit; their snapshots record the archive, not the frames, and a policy
// restored from one (with the file, which may have grown since: it is cut
// back) continues identically; in-memory snapshots move into a fresh
// archive. Policies without an archive refuse archived snapshots, FIFO
// refuses an archive.
func TestArchiveIsIdentical(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, label string
		mod         func(*Config)
	}{
		{NameFullHistory, NameFullHistory, func(*Config) {}},
		{NameLongLiveRAG, "longlive-rag-window", func(c *Config) { c.LongLiveRAG.Pool = RAGPoolWindow }},
		// The physical pool with a 6-frame cache: frames 1–6 are pooled at
		// the snapshot (block 5), the window pool would hold 1–9.
		{NameLongLiveRAG, "longlive-rag-physical", func(c *Config) { c.CacheFrames = 6 }},
	} {
		name := c.name
		t.Run(c.label, func(t *testing.T) {
			cfg := snapConfig()
			c.mod(&cfg)
			mem, _ := New(name, cfg)
			arc, _ := New(name, cfg)
			path := filepath.Join(dir, c.label+".archive")
			if err := arc.(Archiver).UseArchive(path); err != nil {
				t.Fatal(err)
			}
			defer arc.(Archiver).CloseArchive(false)
			sm, sa := newStream(cfg.Layout, 7), newStream(cfg.Layout, 7)
			sameCalls(t, sm, sa, mem, arc, 0, 5)
			var snap, memSnap bytes.Buffer
			if err := arc.(Snapshotter).Save(&snap); err != nil {
				t.Fatal(err)
			}
			if err := mem.(Snapshotter).Save(&memSnap); err != nil {
				t.Fatal(err)
			}
			if snap.Len() >= memSnap.Len() {
				t.Fatalf("archived snapshot of %d bytes, in-memory %d: the frames were saved", snap.Len(), memSnap.Len())
			}
			// Both go on (the archive grows past the snapshot).
			sameCalls(t, sm, sa, mem, arc, 5, 7)
			st, _ := os.Stat(path)
			grown := st.Size()

			// Resume from the snapshot: the archive is cut back to it.
			res, _ := New(name, cfg)
			if err := res.(Snapshotter).Load(bytes.NewReader(snap.Bytes())); err == nil || !strings.Contains(err.Error(), "UseArchive") {
				t.Fatalf("archived snapshot without an archive: %v", err)
			}
			if err := res.(Archiver).UseArchive(path); err != nil {
				t.Fatal(err)
			}
			defer res.(Archiver).CloseArchive(false)
			if err := res.(Snapshotter).Load(bytes.NewReader(snap.Bytes())); err != nil {
				t.Fatal(err)
			}
			if st, _ := os.Stat(path); st.Size() >= grown {
				t.Fatalf("archive of %d bytes after load, %d before: not cut back to the snapshot", st.Size(), grown)
			}
			ref, _ := New(name, cfg)
			if err := ref.(Snapshotter).Load(bytes.NewReader(memSnap.Bytes())); err != nil {
				t.Fatal(err)
			}
			s1, s2 := newStream(cfg.Layout, 7), newStream(cfg.Layout, 7)
			sameCalls(t, s1, s2, ref, res, 5, 9)

			// An in-memory snapshot moves into a fresh archive.
			imp, _ := New(name, cfg)
			if err := imp.(Archiver).UseArchive(filepath.Join(dir, c.label+".import")); err != nil {
				t.Fatal(err)
			}
			defer imp.(Archiver).CloseArchive(true)
			if err := imp.(Snapshotter).Load(bytes.NewReader(memSnap.Bytes())); err != nil {
				t.Fatal(err)
			}
			ref2, _ := New(name, cfg)
			ref2.(Snapshotter).Load(bytes.NewReader(memSnap.Bytes()))
			s3, s4 := newStream(cfg.Layout, 7), newStream(cfg.Layout, 7)
			sameCalls(t, s3, s4, ref2, imp, 5, 8)
		})
	}
	fifo, _ := New(NameFIFO, snapConfig())
	if err := fifo.(Archiver).UseArchive(filepath.Join(dir, "fifo")); err == nil {
		t.Fatal("FIFO took an archive")
	}
}

// TestArchiveDamage: a record of the archive changed on disk is an error
// of the call that reads it, naming the file, frame and layer (wrapping
// ErrArchive); a snapshot whose archive is shorter than it records, or
// whose last frame differs, is refused by Load, which leaves the policy
// unchanged.
func TestArchiveDamage(t *testing.T) {
	dir := t.TempDir()
	cfg := snapConfig()
	p, _ := New(NameFullHistory, cfg)
	path := filepath.Join(dir, "fh.archive")
	if err := p.(Archiver).UseArchive(path); err != nil {
		t.Fatal(err)
	}
	defer p.(Archiver).CloseArchive(false)
	s := newStream(cfg.Layout, 3)
	for b := 0; b < 4; b++ {
		s.block(t, p, b, 1)
	}
	var snap bytes.Buffer
	if err := p.(Snapshotter).Save(&snap); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Layout
	rec := 8 * l.TokensPerFrame() * l.Heads * l.HeadDim
	// Flip a byte of frame 1's layer-1 record (archive frame 0 is frame 1:
	// frame 0 is the sink).
	bad := append([]byte(nil), raw...)
	bad[(0*l.Layers+1)*rec+17] ^= 0x20
	os.WriteFile(path, bad, 0o644)
	err = p.Begin(Call{Block: 4, First: true, Clean: true})
	if err == nil {
		q, k, v := s.qkv(4, 0, 0)
		if _, err = p.Attend(0, q, k, v); err == nil {
			_, err = p.Attend(1, q, k, v)
		}
	}
	if err == nil || !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "frame 1 layer 1") {
		t.Fatalf("damaged record: %v", err)
	}
	os.WriteFile(path, raw, 0o644)

	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", raw[:len(raw)-rec], "need"},
		{"last frame changed", func() []byte {
			b := append([]byte(nil), raw...)
			b[len(b)-l.Layers*rec+5] ^= 1
			return b
		}(), "checksum"},
	} {
		os.WriteFile(path, c.data, 0o644)
		q, _ := New(NameFullHistory, cfg)
		if err := q.(Archiver).UseArchive(path); err != nil {
			t.Fatal(err)
		}
		before := q.Bytes()
		err := q.(Snapshotter).Load(bytes.NewReader(snap.Bytes()))
		if err == nil || !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if q.Bytes() != before {
			t.Fatalf("%s: failed load changed the policy", c.name)
		}
		q.(Archiver).CloseArchive(false)
	}
}
