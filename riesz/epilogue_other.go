//go:build !(goexperiment.simd && amd64)

package riesz

func archInit() {}
