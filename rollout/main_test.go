package rollout

import (
	"os"
	"testing"

	"github.com/densitykv/densitykv/golden"
)

// TestMain runs the tests, then fails if some golden item this package owns
// was compared by no test (see package golden).
func TestMain(m *testing.M) { os.Exit(golden.Main(m, golden.OwnerRollout)) }
