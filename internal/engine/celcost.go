package engine

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// The compile-time cost check. cel-go estimates the worst-case cost of an
// expression from the sizes of its inputs; costEstimator supplies them (the
// request bounds of limits.go) and prices the functions cel-go does not price
// soundly: containsAnyWord/containsAllWords by their real arguments, the ext
// functions join and flatten, whose result sizes cel-go underestimates, and
// the functions that read a whole string at a constant price (size, parsing,
// map keys). Sizes are CEL sizes: runes of a string (at most its bytes),
// entries of a list or map.

// checkCost returns the estimated worst-case cost of a condition, or an
// error when it exceeds CostLimit.
func checkCost(ast *cel.Ast) (uint64, error) {
	cost, err := celEnv.EstimateCost(ast, costEstimator{shadowed: shadowedVariables(ast.NativeRep().Expr())})
	if err != nil {
		return 0, fmt.Errorf("estimating cost: %w", err)
	}
	if cost.Max <= CostLimit {
		return cost.Max, nil
	}
	bounds := fmt.Sprintf("requests are bounded to %d bytes of text, an agent of %d bytes, %d tags of %d bytes and %d metadata pairs of %d-byte keys and %d-byte values",
		MaxTextBytes, MaxAgentBytes, MaxTags, MaxTagBytes, MaxMetadataPairs, MaxMetadataKeyBytes, MaxMetadataValueBytes)
	if cost.Max >= unbounded {
		return 0, fmt.Errorf("too expensive: the worst-case cost cannot be bounded, because the expression builds a value whose size cannot be estimated (%s)", bounds)
	}
	return 0, fmt.Errorf("too expensive: estimated worst-case cost %d exceeds the limit of %d (%s)", cost.Max, CostLimit, bounds)
}

// unbounded is where a saturated estimate starts: no real condition comes near.
const unbounded = math.MaxUint64 / 16

// costEstimator sizes the inputs. shadowed holds the variable names that a
// comprehension of the expression rebinds, whose identifiers may not be the input.
type costEstimator struct {
	shadowed map[string]bool
}

func (costEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if max, ok := pathSize(n.Path()); ok {
		return &checker.SizeEstimate{Min: 0, Max: max}
	}
	return nil
}

func (costEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// pathSize is the largest size of an input reached by a cost-check path: a
// variable, then '@items' (list element), '@keys', '@values' or a field name.
func pathSize(p []string) (uint64, bool) {
	if len(p) == 0 {
		return 0, false
	}
	switch p[0] {
	case "text":
		if len(p) == 1 {
			return MaxTextBytes, true
		}
	case "agent":
		if len(p) == 1 {
			return MaxAgentBytes, true
		}
	case "tags":
		switch {
		case len(p) == 1:
			return MaxTags, true
		case len(p) == 2 && p[1] == "@items":
			return MaxTagBytes, true
		}
	case "metadata":
		switch {
		case len(p) == 1:
			return MaxMetadataPairs, true
		case len(p) == 2 && p[1] == "@keys":
			return MaxMetadataKeyBytes, true
		case len(p) == 2: // "@values" or metadata.<key>
			return MaxMetadataValueBytes, true
		}
	case "vars":
		// Every string, list and map under vars; Compile enforces it.
		return MaxVarsSize, true
	case "detected", "entities":
		// Labels, alternatives and entities are bounded where they are made (detect.go).
		return MaxDetectedSize, true
	}
	return 0, false
}

// shadowedVariables lists the input names a comprehension of e rebinds.
func shadowedVariables(e celast.Expr) map[string]bool {
	var m map[string]bool
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.ComprehensionKind {
			return
		}
		c := e.AsComprehension()
		for _, v := range []string{c.IterVar(), c.IterVar2(), c.AccuVar()} {
			if _, ok := pathSize([]string{v}); ok {
				if m == nil {
					m = map[string]bool{}
				}
				m[v] = true
			}
		}
	}))
	return m
}

// exprSize bounds the size of an expression that is a literal or reads an
// input directly (agent, metadata["k"], metadata.k, tags[i], vars.x).
func (c costEstimator) exprSize(e celast.Expr) (uint64, bool) {
	switch e.Kind() {
	case celast.LiteralKind:
		if s, ok := e.AsLiteral().(types.String); ok {
			return uint64(utf8.RuneCountInString(string(s))), true
		}
	case celast.ListKind:
		return uint64(e.AsList().Size()), true
	case celast.IdentKind:
		return c.varPathSize(e.AsIdent())
	case celast.SelectKind:
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() == celast.IdentKind && !sel.IsTestOnly() {
			return c.varPathSize(op.AsIdent(), sel.FieldName())
		}
	case celast.CallKind:
		call := e.AsCall()
		if call.FunctionName() == "_[_]" && len(call.Args()) == 2 && call.Args()[0].Kind() == celast.IdentKind {
			name := call.Args()[0].AsIdent()
			elem := "@values"
			if name == "tags" {
				elem = "@items"
			}
			return c.varPathSize(name, elem)
		}
	}
	return 0, false
}

func (c costEstimator) varPathSize(name string, rest ...string) (uint64, bool) {
	if c.shadowed[name] {
		return 0, false
	}
	return pathSize(append([]string{name}, rest...))
}

// entrySize bounds the size of the entries of a list: the largest literal of
// a list literal, or the input's element size; ok is false when unknown.
func (c costEstimator) entrySize(list checker.AstNode) (uint64, bool) {
	if e := list.Expr(); e.Kind() == celast.ListKind {
		var largest uint64
		for _, el := range e.AsList().Elements() {
			n, ok := c.exprSize(el)
			if !ok {
				return 0, false
			}
			largest = max(largest, n)
		}
		return largest, true
	}
	p := list.Path()
	if len(p) == 0 {
		return 0, false
	}
	return pathSize(append(append([]string(nil), p...), "@items"))
}

// sizeOf is the checker's size of a node, or the input bound of its path.
func sizeOf(est checker.CostEstimator, n checker.AstNode) uint64 {
	if s := n.ComputedSize(); s != nil {
		return s.Max
	}
	if s := est.EstimateSize(n); s != nil {
		return s.Max
	}
	return math.MaxUint64
}

// costOptions are the estimators that replace or add to cel-go's.
func costOptions() []checker.CostOption {
	opts := []checker.CostOption{
		checker.OverloadCostEstimate(containsAnyWordID, estimateWords),
		checker.OverloadCostEstimate(containsAllWordsID, estimateWords),
		checker.OverloadCostEstimate("list_join", estimateJoin),
		checker.OverloadCostEstimate("list_join_string", estimateJoin),
		checker.OverloadCostEstimate("list_flatten", estimateFlatten),
		checker.OverloadCostEstimate("list_flatten_int", estimateFlatten),
	}
	for id, arg := range readsWholeString {
		opts = append(opts, checker.OverloadCostEstimate(id, estimateStringRead(arg)))
	}
	return opts
}

// readsWholeString are overloads cel-go prices at one unit although they read
// a whole string (counting runes, parsing, hashing a map key), by the
// position of that string: -1 is the target of a member call. Inside a loop
// over a large list, `size(text)` was underpriced a thousandfold.
var readsWholeString = map[string]int{
	overloads.SizeString:                   0,
	overloads.SizeStringInst:               -1,
	overloads.StringToInt:                  0,
	overloads.StringToUint:                 0,
	overloads.StringToDouble:               0,
	overloads.StringToBool:                 0,
	overloads.StringToTimestamp:            0,
	overloads.StringToDuration:             0,
	overloads.InMap:                        0,
	overloads.IndexMap:                     1,
	"map_optindex_optional_value":          1,
	"optional_map_index_value":             1,
	"optional_map_optindex_optional_value": 1,
}

// estimateStringRead prices reading the string at position arg like cel-go
// prices a scan: a tenth of a unit per rune.
func estimateStringRead(arg int) checker.FunctionEstimator {
	return func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		var n checker.AstNode
		switch {
		case arg < 0 && target != nil:
			n = *target
		case arg >= 0 && arg < len(args):
			n = args[arg]
		default:
			return nil
		}
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: addSat(1, divCeil(sizeOf(est, n), 10))}}
	}
}

// The cost model of containsAnyWord/containsAllWords, in CEL cost units. The
// estimate applies it to the largest inputs, runtime cost tracking (the
// tests) to the actual ones.
//
//   - Tokenising a string (splitting, lower-casing, stemming, building the
//     word set) costs tokenizeCostPerRune per rune. The question (`text`
//     itself) is charged for at most sharedWordsMinBytes runes per call:
//     a longer one is tokenised once per query.
//   - An entry of at most one word costs its tokenising plus one look-up:
//     a scan of at most linearScanMax words or a set probe.
//   - An entry of several words costs its tokenising, one set probe per word
//     and a Knuth–Morris–Pratt scan of the text (at most two comparisons per
//     word, a tenth of a unit each, as cel-go prices a character).
const tokenizeCostPerRune = 1

func tokenizeCost(runes uint64) uint64 { return mulSat(runes, tokenizeCostPerRune) }

// wordsEntryCost prices one entry of entryRunes runes and entryWords words
// against a text of textWords words.
func wordsEntryCost(entryRunes, entryWords, textWords uint64) uint64 {
	c := tokenizeCost(entryRunes)
	if entryWords <= 1 {
		return addSat(c, 1+(min(textWords, linearScanMax)+9)/10)
	}
	return addSat(c, addSat(entryWords, divCeil(mulSat(2, addSat(textWords, entryWords)), 10)))
}

// maxWords is the most words a string of n runes holds: each word and each
// separator takes at least one rune.
func maxWords(runes uint64) uint64 {
	if runes == math.MaxUint64 {
		return runes
	}
	return (runes + 1) / 2
}

// estimateWords prices containsAnyWord(t, list) and containsAllWords(t, list)
// for the largest t and list: every entry may be compared.
func estimateWords(est checker.CostEstimator, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if len(args) != 2 {
		return nil
	}
	c, _ := est.(costEstimator)
	textRunes := sizeOf(est, args[0])
	n := maxWords(textRunes)
	cost := uint64(1)
	if c.isQueryText(args[0]) {
		// A longer question is tokenised once per query (queryTexts).
		cost = addSat(cost, tokenizeCost(min(textRunes, sharedWordsMinBytes)))
	} else {
		cost = addSat(cost, tokenizeCost(textRunes))
	}
	if list := args[1].Expr(); list.Kind() == celast.ListKind {
		for _, el := range list.AsList().Elements() {
			if el.Kind() == celast.LiteralKind {
				if s, ok := el.AsLiteral().(types.String); ok {
					cost = addSat(cost, wordsEntryCost(uint64(utf8.RuneCountInString(string(s))), uint64(len(tokenize.WordStems(string(s)))), n))
					continue
				}
			}
			size, ok := c.exprSize(el)
			if !ok {
				size = MaxWordEntryBytes
			}
			cost = addSat(cost, unknownEntryCost(min(size, MaxWordEntryBytes), n))
		}
	} else {
		size, ok := c.entrySize(args[1])
		if !ok {
			size = MaxWordEntryBytes // longer entries are an evaluation error
		}
		cost = addSat(cost, mulSat(sizeOf(est, args[1]), unknownEntryCost(min(size, MaxWordEntryBytes), n)))
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}}
}

// unknownEntryCost prices an entry known only by its size: the phrase case
// costs at least as much as the one-word case.
func unknownEntryCost(runes, textWords uint64) uint64 {
	return wordsEntryCost(runes, max(2, maxWords(runes)), textWords)
}

// isQueryText reports whether n is the variable `text`, whose words are
// computed once per query (queryTexts).
func (c costEstimator) isQueryText(n checker.AstNode) bool {
	p := n.Path()
	return !c.shadowed["text"] && n.Expr().Kind() == celast.IdentKind && len(p) == 1 && p[0] == "text"
}

// estimateJoin prices list.join(sep): cel-go assumes one-character entries,
// so `tags.join("")` looked like a 129-character string.
func estimateJoin(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || len(args) > 1 {
		return nil
	}
	c, _ := est.(costEstimator)
	count := sizeOf(est, *target)
	entry, ok := c.entrySize(*target)
	if !ok {
		entry = math.MaxUint64
	}
	var sep uint64
	if len(args) == 1 {
		sep = sizeOf(est, args[0])
	}
	result := mulSat(count, addSat(entry, sep))
	cost := addSat(1, addSat(divCeil(addSat(count, 1), 10), result))
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}, ResultSize: &checker.SizeEstimate{Min: 0, Max: result}}
}

// estimateFlatten prices list.flatten() and list.flatten(depth): cel-go
// assumes the result is no longer than the list of lists.
func estimateFlatten(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || len(args) > 1 {
		return nil
	}
	c, _ := est.(costEstimator)
	depth := uint64(1)
	if len(args) == 1 {
		depth = math.MaxUint64
		if e := args[0].Expr(); e.Kind() == celast.LiteralKind {
			if d, ok := e.AsLiteral().(types.Int); ok && d >= 0 {
				depth = uint64(d)
			}
		}
	}
	size := c.flattenedSize(*target, est, depth)
	cost := addSat(1, mulSat(size, max(depth, 1)))
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}, ResultSize: &checker.SizeEstimate{Min: 0, Max: size}}
}

// flattenedSize bounds the length of a list flattened depth levels: the sum
// over a list literal's elements, or vars' bound per level.
func (c costEstimator) flattenedSize(list checker.AstNode, est checker.CostEstimator, depth uint64) uint64 {
	if depth == 0 {
		return sizeOf(est, list)
	}
	if e := list.Expr(); e.Kind() == celast.ListKind && depth == 1 {
		var total uint64
		for _, el := range e.AsList().Elements() {
			switch el.Kind() {
			case celast.LiteralKind:
				total = addSat(total, 1)
			default:
				n, ok := c.exprSize(el)
				if !ok {
					return math.MaxUint64
				}
				total = addSat(total, max(n, 1))
			}
		}
		return total
	}
	if p := list.Path(); len(p) > 0 && p[0] == "vars" && !c.shadowed["vars"] {
		size := uint64(MaxVarsSize)
		for range min(depth, 8) {
			size = mulSat(size, MaxVarsSize)
		}
		return size
	}
	return math.MaxUint64
}

func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func mulSat(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

func divCeil(a, b uint64) uint64 {
	if a == math.MaxUint64 {
		return a
	}
	return (a + b - 1) / b
}
