//go:build ignore

// gen writes kernels_amd64.s from package asmgen.
//
//	go run gen.go [-o kernels_amd64.s] [-mutate NAME]
package main

import (
	"flag"
	"log"
	"os"

	"github.com/densitykv/densitykv/gemm/internal/asmgen"
)

func main() {
	out := flag.String("o", "kernels_amd64.s", "output file")
	mut := flag.String("mutate", "", "break one instruction (see asmgen.Mutations; for the mutation test)")
	flag.Parse()
	b, err := asmgen.Generate(asmgen.Options{Mutate: *mut})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		log.Fatal(err)
	}
}
