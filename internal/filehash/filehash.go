// Package filehash identifies input files by their content: model
// checkpoints, tokenizers, text embeddings. It is what resume checks,
// the text-embedding cache keys and the video metadata record.
//
// Files up to Whole bytes are hashed whole (SHA-256); larger ones (model
// checkpoints of several GiB) by their size and Pieces evenly spaced
// pieces of Piece bytes, the first and last included, so that identifying
// an 11 GB text encoder does not read it a second time. Sum.Sampled says
// which, and Sum.String writes it into the label.
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Sampling of large files (variables for tests).
var (
	Whole  int64 = 256 << 20
	Pieces int64 = 64
	Piece  int64 = 1 << 20
)

// Sum identifies one file's content.
type Sum struct {
	Size    int64
	SHA256  string // hex; of the whole file, or of its size and pieces when Sampled
	Sampled bool
}

// String is "sha256:<hex>" for a file hashed whole and
// "sampled-sha256:<hex>" for a large one.
func (s Sum) String() string {
	if s.Sampled {
		return "sampled-sha256:" + s.SHA256
	}
	return "sha256:" + s.SHA256
}

// File returns the Sum of the file at path.
func File(path string) (Sum, error) {
	var s Sum
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return s, err
	}
	if st.IsDir() {
		return s, fmt.Errorf("%s is a folder, want a file", path)
	}
	s.Size = st.Size()
	h := sha256.New()
	if s.Size <= Whole || s.Size < Pieces*Piece {
		if _, err := io.Copy(h, f); err != nil {
			return s, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		s.Sampled = true
		fmt.Fprintf(h, "sampled %d %d %d\n", s.Size, Pieces, Piece)
		buf := make([]byte, Piece)
		for i := range Pieces {
			off := i * (s.Size - Piece) / (Pieces - 1)
			if _, err := f.ReadAt(buf, off); err != nil {
				return s, fmt.Errorf("%s: %w", path, err)
			}
			h.Write(buf)
		}
	}
	s.SHA256 = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// Path returns the Sum of the file at path, or of the folder at path (a
// model folder: diffusers, Hugging Face): the SHA-256 of the list of its
// files (every regular file below it, symbolic links followed, names
// starting with "." skipped), each by its path relative to the folder,
// its size and its own Sum, in path order. Size is the files' total;
// Sampled says whether any file was sampled.
func Path(path string) (Sum, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Sum{}, err
	}
	if !st.IsDir() {
		return File(path)
	}
	var rels []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != path && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p) // through a symbolic link (a Hugging Face cache's blobs)
		if err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			rel, err := filepath.Rel(path, p)
			if err != nil {
				return err
			}
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return Sum{}, err
	}
	if len(rels) == 0 {
		return Sum{}, fmt.Errorf("%s is an empty folder", path)
	}
	sort.Strings(rels)
	h := sha256.New()
	var s Sum
	fmt.Fprintf(h, "folder %d\n", len(rels))
	for _, rel := range rels {
		f, err := File(filepath.Join(path, filepath.FromSlash(rel)))
		if err != nil {
			return Sum{}, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%s\n", rel, f.Size, f)
		s.Size += f.Size
		s.Sampled = s.Sampled || f.Sampled
	}
	s.SHA256 = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// Bytes returns the hex SHA-256 of b.
func Bytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// WholeFile returns the hex SHA-256 of the whole file at path, however
// large (File samples a file over Whole bytes): what a run records of the
// files it writes, such as the latent shards.
func WholeFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
