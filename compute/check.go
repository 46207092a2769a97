package compute

import "fmt"

// Need is an operand of an operation and the values it must hold: Check
// compares it with the tensor's length.
type Need struct {
	Name string
	T    Tensor
	N    int
}

// Check returns an error naming the operation and the operand when a size
// is negative, an operand is nil, or a tensor holds fewer values than it
// needs; backends call it before recording an operation.
func Check(op string, needs ...Need) error {
	for _, n := range needs {
		switch {
		case n.N < 0:
			return fmt.Errorf("%s: %s: negative size %d", op, n.Name, n.N)
		case n.T == nil:
			return fmt.Errorf("%s: %s is nil", op, n.Name)
		case n.T.Len() < n.N:
			return fmt.Errorf("%s: %s holds %d values, want %d", op, n.Name, n.T.Len(), n.N)
		}
	}
	return nil
}

// Need returns the operand v is for groups groups of [d] vectors (its
// last vector's end; an error-valued size for a negative offset or
// stride).
func (v Vec) Need(name string, groups, d int) Need {
	if v.Off < 0 || v.Stride < 0 || groups < 0 || d < 0 {
		return Need{Name: fmt.Sprintf("%s (offset %d, stride %d, %d groups of %d)", name, v.Off, v.Stride, groups, d), T: v.T, N: -1}
	}
	if groups == 0 {
		return Need{Name: name, T: v.T}
	}
	return Need{Name: name, T: v.T, N: v.Off + (groups-1)*v.Stride + d}
}

// Groups returns the number of groups of groupRows rows that rows rows
// span (an error for groupRows < 1 when rows > 0).
func Groups(op string, rows, groupRows int) (int, error) {
	if rows < 0 {
		return 0, fmt.Errorf("%s: %d rows", op, rows)
	}
	if rows == 0 {
		return 0, nil
	}
	if groupRows < 1 {
		return 0, fmt.Errorf("%s: %d rows per group", op, groupRows)
	}
	return (rows + groupRows - 1) / groupRows, nil
}
