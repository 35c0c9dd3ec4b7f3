package memstore

import (
	"testing"

	"github.com/contextrouter/contextrouter/internal/funclen"
)

// TestFunctionLength keeps every function of the package a short driver or
// a step (docs/design.md, "function length").
func TestFunctionLength(t *testing.T) { funclen.Check(t, ".", funclen.Limit) }
