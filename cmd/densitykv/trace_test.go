package main

import (
	"context"
	"strings"
	"testing"
)

// trace on a folder that is not a run folder is a bad argument (exit 2).
func TestTraceNotARunFolder(t *testing.T) {
	dir := t.TempDir()
	code, _, errs := run(t, context.Background(), "trace", dir)
	if code != exitUsage || !strings.Contains(errs, "not a densitykv run folder") {
		t.Fatalf("trace of a plain folder: exit %d, %q", code, errs)
	}
}
