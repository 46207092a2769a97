package wan

import (
	"os"
	"testing"

	"github.com/densitykv/densitykv/internal/goldencov"
)

// TestMain runs the tests, then fails if some golden item this package owns
// was compared by no test (see package goldencov).
func TestMain(m *testing.M) { os.Exit(goldencov.Main(m, goldencov.Wan)) }
