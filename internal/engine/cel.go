package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Input bounds of a query. They make the cost of a condition computable at
// compile time (and are enforced by Query), so an expensive condition is
// refused when it is applied instead of slowing every query.
const (
	MaxTextBytes     = 64 << 10
	MaxTags          = 64
	MaxMetadataPairs = 64
	maxShortString   = 1024
)

// CostLimit bounds the estimated worst-case cost of one condition (CEL cost
// units; one unit is roughly one simple operation).
const CostLimit = 1_000_000

// celEnv is the environment every route condition compiles in. It is built
// once: cel.Env is safe for concurrent use.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("text", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("tags", cel.ListType(cel.StringType)),
		cel.Variable("metadata", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("vars", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
		ext.Lists(),
		cel.OptionalTypes(),
		cel.Function("containsAnyWord",
			cel.Overload("containsAnyWord_string_list_string",
				[]*cel.Type{cel.StringType, cel.ListType(cel.StringType)}, cel.BoolType,
				cel.BinaryBinding(func(text, words ref.Val) ref.Val { return containsWords(text, words, false) }))),
		cel.Function("containsAllWords",
			cel.Overload("containsAllWords_string_list_string",
				[]*cel.Type{cel.StringType, cel.ListType(cel.StringType)}, cel.BoolType,
				cel.BinaryBinding(func(text, words ref.Val) ref.Val { return containsWords(text, words, true) }))),
	)
	if err != nil {
		panic(fmt.Sprintf("engine: building the CEL environment: %v", err))
	}
	return env
}()

// compiled caches programs by expression text. The operator recompiles a
// namespace's routes on every reconcile and most conditions are unchanged;
// a cel.Program is immutable and safe to share.
var compiled = struct {
	sync.Mutex
	m map[string]compileResult
}{m: map[string]compileResult{}}

type compileResult struct {
	prg cel.Program
	err error
}

const maxCompiledCache = 16384

// CompileCondition compiles a route condition. The error text is the CEL
// compiler's, which points at the offending column. An empty condition is nil.
func CompileCondition(expr string) (cel.Program, error) {
	if expr == "" {
		return nil, nil
	}
	compiled.Lock()
	r, ok := compiled.m[expr]
	compiled.Unlock()
	if ok {
		return r.prg, r.err
	}
	prg, err := compileCondition(expr)
	compiled.Lock()
	if len(compiled.m) >= maxCompiledCache {
		clear(compiled.m) // crude but bounded; real configurations stay far below
	}
	compiled.m[expr] = compileResult{prg, err}
	compiled.Unlock()
	return prg, err
}

func compileCondition(expr string) (cel.Program, error) {
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must evaluate to bool, not %s", ast.OutputType())
	}
	cost, err := celEnv.EstimateCost(ast, costEstimator{})
	if err != nil {
		return nil, fmt.Errorf("estimating cost: %w", err)
	}
	if cost.Max > CostLimit {
		return nil, fmt.Errorf("too expensive: estimated worst-case cost %d exceeds the limit of %d (queries are bounded to %d bytes of text, %d tags and %d metadata pairs)",
			cost.Max, CostLimit, MaxTextBytes, MaxTags, MaxMetadataPairs)
	}
	// OptOptimize precomputes constant list literals instead of rebuilding them per evaluation.
	return celEnv.Program(ast, cel.EvalOptions(cel.OptOptimize))
}

// costEstimator gives the compile-time cost check the sizes of the inputs.
type costEstimator struct{}

func (costEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	p := n.Path()
	if len(p) == 0 {
		return nil
	}
	switch {
	case p[0] == "text":
		return &checker.SizeEstimate{Min: 0, Max: MaxTextBytes}
	case p[0] == "tags" && len(p) == 1:
		return &checker.SizeEstimate{Min: 0, Max: MaxTags}
	case p[0] == "metadata" && len(p) == 1:
		return &checker.SizeEstimate{Min: 0, Max: MaxMetadataPairs}
	}
	return &checker.SizeEstimate{Min: 0, Max: maxShortString}
}

func (costEstimator) EstimateCallCost(fn, _ string, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if fn != "containsAnyWord" && fn != "containsAllWords" {
		return nil
	}
	// Tokenising the text dominates; it is cached across the routes of a query.
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1 + MaxTextBytes/10}}
}

// evalCondition runs a compiled condition; a non-bool result is an error.
func evalCondition(prg cel.Program, act interpreter.Activation) (bool, error) {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("evaluated to %s, not bool", out.Type())
	}
	return b, nil
}

// activation exposes one query to conditions without building a map. Values
// are boxed once, so resolving a name does not allocate.
type activation struct {
	text, agent, tags, metadata, vars any
}

func newActivation(req *Request, vars ref.Val) *activation {
	tags := req.Tags
	if tags == nil {
		tags = []string{}
	}
	md := req.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return &activation{
		text:     types.String(req.Text),
		agent:    types.String(req.Agent),
		tags:     types.NewStringList(types.DefaultTypeAdapter, tags),
		metadata: types.NewStringStringMap(types.DefaultTypeAdapter, md),
		vars:     vars,
	}
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "text":
		return a.text, true
	case "agent":
		return a.agent, true
	case "tags":
		return a.tags, true
	case "metadata":
		return a.metadata, true
	case "vars":
		return a.vars, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// stemmedText caches the word stems of the last text seen, because every
// route of a query asks about the same text.
type stemmedText struct {
	text  string
	stems []string
}

var lastText atomic.Pointer[stemmedText]

func textStems(s string) []string {
	if c := lastText.Load(); c != nil && c.text == s {
		return c.stems
	}
	st := &stemmedText{text: s, stems: tokenize.WordStems(s)}
	lastText.Store(st)
	return st.stems
}

// containsWords matches whole words after the scorer's tokenisation (so
// "vacations" matches "vacation"); an entry of several words matches that
// sequence of words.
func containsWords(textVal, wordsVal ref.Val, all bool) ref.Val {
	text, ok := textVal.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(textVal)
	}
	list, ok := wordsVal.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(wordsVal)
	}
	stems := textStems(string(text))
	n, ok := list.Size().(types.Int)
	if !ok {
		return types.NewErr("containsAnyWord: list has no size")
	}
	// Index instead of Iterator: no iterator allocation per call.
	for i := types.Int(0); i < n; i++ {
		w, ok := list.Get(i).(types.String)
		if !ok {
			return types.NewErr("containsAnyWord: list elements must be strings")
		}
		found := containsEntry(stems, string(w))
		if found && !all {
			return types.True
		}
		if !found && all {
			return types.False
		}
	}
	return types.Bool(all && n > 0)
}

// containsEntry matches one list entry; a single plain word skips tokenising.
func containsEntry(stems []string, entry string) bool {
	plain := entry != ""
	for i := 0; i < len(entry); i++ {
		if c := entry[i]; c < 'a' || c > 'z' {
			plain = false
			break
		}
	}
	if plain {
		st := tokenize.Stem(entry)
		for _, s := range stems {
			if s == st {
				return true
			}
		}
		return false
	}
	return containsSeq(stems, tokenize.WordStems(entry))
}

func containsSeq(stems, seq []string) bool {
	if len(seq) == 0 {
		return false
	}
outer:
	for i := 0; i+len(seq) <= len(stems); i++ {
		for j, s := range seq {
			if stems[i+j] != s {
				continue outer
			}
		}
		return true
	}
	return false
}

// resetCompiledCache empties the program cache (benchmarks of cold compiles).
func resetCompiledCache() {
	compiled.Lock()
	clear(compiled.m)
	compiled.Unlock()
}
