package record

import (
	"strings"
	"testing"
)

// TestTraceHeat checks the attention-trace panel: the column of memory with
// an unknown source frame appears only when some attention went there, the
// policy is in the title, and bad files are errors.
func TestTraceHeat(t *testing.T) {
	tf := TraceFile{Policy: "densitykv", Step: 3, Frames: 2, Mass: [][]float64{{1, 0, 0}, {0.25, 0.75, 0}}}
	hp, err := traceHeat(tf)
	if err != nil {
		t.Fatal(err)
	}
	if hp.Grid.Cols != 2 || len(hp.Grid.Z) != 4 || hp.Grid.Z[3] != 0.75 || strings.Contains(hp.XLabel, "unknown") {
		t.Fatalf("without unknown-source mass: %d columns, z %v, x label %q", hp.Grid.Cols, hp.Grid.Z, hp.XLabel)
	}
	if !strings.Contains(hp.Title, "densitykv") || !strings.Contains(hp.Title, "pass 4") {
		t.Fatalf("title %q", hp.Title)
	}
	tf.Mass[1] = []float64{0.25, 0.5, 0.25}
	if hp, err = traceHeat(tf); err != nil || hp.Grid.Cols != 3 || hp.Grid.Z[5] != 0.25 || !strings.Contains(hp.XLabel, "column 2: unknown") {
		t.Fatalf("with unknown-source mass: %v, %d columns, z %v, x label %q", err, hp.Grid.Cols, hp.Grid.Z, hp.XLabel)
	}
	tf.Mass = tf.Mass[:1]
	if _, err := traceHeat(tf); err == nil {
		t.Fatal("a trace with a missing row was accepted")
	}
}
