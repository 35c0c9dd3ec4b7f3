package tools_test

import (
	"testing"

	"github.com/contextrouter/contextrouter/internal/funclen"
)

// No function of the package is over funclen.Limit lines (issue 23).
func TestFunctionLength(t *testing.T) { funclen.CheckTree(t, ".", funclen.Limit) }
