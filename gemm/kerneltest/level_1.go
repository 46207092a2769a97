//go:build amd64 && !amd64.v2

package kerneltest

// amd64Level is the GOAMD64 level the binary was built for (0: not amd64).
const amd64Level = 1
