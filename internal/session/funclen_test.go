package session

import (
	"testing"

	"github.com/contextrouter/contextrouter/internal/funclen"
)

// TestFunctionLength keeps every function of the package and of every
// package below it (memstore, redisstore, storeselect, storetest, ...) a
// short driver or a step (docs/design.md, "function length").
func TestFunctionLength(t *testing.T) { funclen.CheckTree(t, ".", funclen.Limit) }
