// Package csrc holds the C sources of nearnative's own benchmark programs,
// embedded in the binary so that `nearnative image build` can compile them
// wherever nearnative runs (package benchbin says how):
//
//	stream/stream.c    nn-stream:  McCalpin's STREAM kernels with OpenMP
//	linpack/linpack.c  nn-linpack: HPL's problem solved with OpenBLAS's LAPACK
//	rr/rr.c            nn-rr:      1-byte TCP request/response (netperf TCP_RR)
package csrc

import "embed"

// FS holds the sources, by their path under csrc/.
//
//go:embed stream/stream.c linpack/linpack.c rr/rr.c
var FS embed.FS
