// Package studies holds the built-in study files, embedded in the binary.
// Each NAME.yaml defines the study NAME; package study reads them.
package studies

import "embed"

// FS holds the built-in study files, NAME.yaml at the top level.
//
//go:embed *.yaml
var FS embed.FS
