package engine

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"

	"github.com/contextrouter/contextrouter/internal/lru"
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// CostLimit bounds the estimated worst-case cost of one condition (CEL cost
// units; one unit is roughly one simple operation).
const CostLimit = 1_000_000

// Overload IDs of the word functions; the cost model prices them.
const (
	containsAnyWordID  = "containsAnyWord_string_list_string"
	containsAllWordsID = "containsAllWords_string_list_string"
)

// interruptEvery is how many comprehension steps pass between two looks at the
// query's context: cheap enough to be invisible, frequent enough that a loop
// stops within microseconds of the deadline.
const interruptEvery = 16

// minInterruptibleCost is the estimated cost below which a condition is not
// worth interrupting: cel-go's unit is about 50 ns, so well under a millisecond.
const minInterruptibleCost = 10_000

// celEnv is the environment every route condition compiles in. It is built
// once: cel.Env is safe for concurrent use.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("text", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("tags", cel.ListType(cel.StringType)),
		cel.Variable("metadata", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("vars", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("detected", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("entities", cel.ListType(cel.MapType(cel.StringType, cel.DynType))),
		ext.Strings(),
		ext.Lists(),
		cel.OptionalTypes(),
		cel.Function("containsAnyWord",
			cel.Overload(containsAnyWordID,
				[]*cel.Type{cel.StringType, cel.ListType(cel.StringType)}, cel.BoolType,
				cel.BinaryBinding(func(text, words ref.Val) ref.Val { return containsWords(text, words, false) }))),
		cel.Function("containsAllWords",
			cel.Overload(containsAllWordsID,
				[]*cel.Type{cel.StringType, cel.ListType(cel.StringType)}, cel.BoolType,
				cel.BinaryBinding(func(text, words ref.Val) ref.Val { return containsWords(text, words, true) }))),
		// After the ext libraries: these replace estimators of theirs (celcost.go).
		cel.CostEstimatorOptions(costOptions()...),
	)
	if err != nil {
		panic(fmt.Sprintf("engine: building the CEL environment: %v", err))
	}
	return env
}()

// theaiosSyntax spots the condition language of theaios-context-router
// (word operators between operands, and/or/not as words), which a converted
// or hand-copied route may still hold; a CEL error on such a condition gets
// theaiosHint. Only failing conditions are looked at.
var theaiosSyntax = regexp.MustCompile(`(?i)(^|[\s)"'])(contains|starts_with|ends_with|matches|not\s+in)\s+["'$\w(\[]|\s(and|or)\s|^\s*not\s`)

// celStrings are string literals, left out when looking for theaiosSyntax
// (a word "and" inside a quoted text is no operator).
var celStrings = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)

const theaiosHint = `this looks like theaios condition syntax; conditions are CEL: text.contains("x"), &&, ||, ! (see contextrouter convert --from theaios)`

// condition is a compiled route condition.
type condition struct {
	prg cel.Program
	// loops is set when the expression has a comprehension (exists, all, map,
	// filter, ...) and may cost more than minInterruptibleCost: cel-go checks
	// for interrupts only in comprehension steps, and a context-aware
	// evaluation costs two allocations, so only such conditions get one.
	loops bool
	// words is set when the expression calls containsAnyWord/containsAllWords.
	words bool
	// detect is what the condition reads of detection (detect.go).
	detect detectRefs
	// unguarded are the metadata keys read without a presence test (UnguardedMetadataKeys).
	unguarded []string
	// expr is the condition's text; constant what it folds to (constantValue).
	expr      string
	constOnce sync.Once
	constant  constValue
}

// constantValue is what the condition folds to when no query can change it
// (when: "true"): constTrue or constFalse; constNone otherwise. Only the
// gate warnings ask, for routers with fallbacks, so folding (as costly as a
// second compile) is done on first use, once per cached condition.
func (c *condition) constantValue() constValue {
	c.constOnce.Do(func() {
		// The text compiled before, cost check included: folding is bounded.
		if ast, iss := celEnv.Compile(c.expr); iss.Err() == nil {
			c.constant = constantOf(ast)
		}
	})
	return c.constant
}

// constValue is the value of a condition that does not depend on the query.
type constValue uint8

const (
	constNone constValue = iota
	constTrue
	constFalse
)

// folder folds a condition's constant parts, to tell a condition that holds
// for every query, or for none, from one that depends on the query.
var folder = func() *cel.StaticOptimizer {
	f, err := cel.NewConstantFoldingOptimizer()
	if err != nil {
		panic(fmt.Sprintf("engine: building the constant folder: %v", err))
	}
	o, err := cel.NewStaticOptimizer(f)
	if err != nil {
		panic(fmt.Sprintf("engine: building the constant folder: %v", err))
	}
	return o
}()

// constantOf is what a checked condition folds to.
func constantOf(ast *cel.Ast) constValue {
	folded, iss := folder.Optimize(celEnv, ast)
	if iss.Err() != nil {
		return constNone
	}
	e := folded.NativeRep().Expr()
	if e.Kind() != celast.LiteralKind {
		return constNone
	}
	switch e.AsLiteral() {
	case types.True:
		return constTrue
	case types.False:
		return constFalse
	}
	return constNone
}

// compiled caches conditions by expression text. The operator recompiles a
// namespace's routes on every reconcile and most conditions are unchanged;
// a cel.Program is immutable and safe to share. Past maxCompiledCache the
// condition used longest ago is dropped, not all of them.
var compiled = lru.New[string, compileResult](maxCompiledCache)

type compileResult struct {
	cond *condition
	err  error
}

const maxCompiledCache = 16384

// CompileCondition compiles a route condition. The error text is the CEL
// compiler's, which points at the offending column. An empty condition is nil.
func CompileCondition(expr string) (cel.Program, error) {
	c, err := compileCached(expr)
	if c == nil {
		return nil, err
	}
	return c.prg, err
}

func compileCached(expr string) (*condition, error) {
	if expr == "" {
		return nil, nil
	}
	if r, ok := compiled.Get(expr); ok {
		return r.cond, r.err
	}
	c, err := compileCondition(expr)
	compiled.Add(expr, compileResult{c, err})
	return c, err
}

func compileCondition(expr string) (*condition, error) {
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		if theaiosSyntax.MatchString(celStrings.ReplaceAllString(expr, `""`)) {
			return nil, fmt.Errorf("%w\n%s", iss.Err(), theaiosHint)
		}
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must evaluate to bool, not %s", ast.OutputType())
	}
	c := &condition{detect: detectRefsOf(ast.NativeRep().Expr())}
	var refused error
	var md metadataReads
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		md.visit(e)
		switch e.Kind() {
		case celast.ComprehensionKind:
			c.loops = true
		case celast.CallKind:
			switch e.AsCall().FunctionName() {
			case "containsAnyWord", "containsAllWords":
				c.words = true
			case "format":
				if refused == nil {
					refused = fmt.Errorf("format is not available in conditions: its work cannot be bounded by the cost check; build strings with + instead")
				}
			}
		}
	}))
	if refused != nil {
		return nil, refused
	}
	c.unguarded = md.unguarded()
	cost, err := checkCost(ast)
	if err != nil {
		return nil, err
	}
	c.expr = expr
	// A cheap loop ends soon enough; the check between routes covers it.
	c.loops = c.loops && cost > minInterruptibleCost
	// OptOptimize precomputes constant list literals instead of rebuilding them per evaluation.
	prg, err := celEnv.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, err
	}
	c.prg = prg
	return c, nil
}

// eval runs a condition; a non-bool result is an error. Under a context that
// can end, a condition with loops is evaluated so that it stops when the
// context ends (the error then wraps the context's error).
func (c *condition) eval(ctx context.Context, act interpreter.Activation) (bool, error) {
	var out ref.Val
	var err error
	if c.loops && ctx.Done() != nil {
		out, _, err = c.prg.ContextEval(ctx, act)
	} else {
		out, _, err = c.prg.Eval(act)
	}
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
	// det computes detected and entities on first use (nil: no classifiers).
	det *detector
	// question shares the words of text between the query's calls.
	question queryText
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
	case "detected":
		if a.det == nil {
			return emptyDetected, true
		}
		a.det.run()
		return a.det.detected, true
	case "entities":
		if a.det == nil {
			return noEntities, true
		}
		a.det.run()
		return a.det.entities, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// words is a tokenised text: the stems of its words in order and, for a long
// text, their set, so that looking a word up does not scan the text.
type words struct {
	stems []string
	set   map[string]struct{}
}

// linearScanMax is the longest text whose words are scanned instead of put in
// a set: a question of a few dozen words is faster to scan than to hash.
const linearScanMax = 64

func newWords(s string) *words {
	w := &words{stems: tokenize.WordStems(s)}
	if len(w.stems) > linearScanMax {
		w.set = make(map[string]struct{}, len(w.stems)/2)
		for _, st := range w.stems {
			w.set[st] = struct{}{}
		}
	}
	return w
}

func (w *words) has(stem string) bool {
	if w.set != nil {
		_, ok := w.set[stem]
		return ok
	}
	for _, s := range w.stems {
		if s == stem {
			return true
		}
	}
	return false
}

// containsEntry matches one list entry; a single plain word skips tokenising.
func (w *words) containsEntry(entry string) bool {
	plain := entry != ""
	for i := 0; i < len(entry); i++ {
		if c := entry[i]; c < 'a' || c > 'z' {
			plain = false
			break
		}
	}
	if plain {
		return w.has(tokenize.Stem(entry))
	}
	seq := tokenize.WordStems(entry)
	switch len(seq) {
	case 0:
		return false
	case 1:
		return w.has(seq[0])
	}
	if w.set != nil {
		for _, s := range seq {
			if _, ok := w.set[s]; !ok {
				return false
			}
		}
	}
	return containsSeq(w.stems, seq)
}

// containsSeq reports whether seq occurs in stems, with Knuth–Morris–Pratt:
// linear in len(stems)+len(seq) however repetitive the text is.
func containsSeq(stems, seq []string) bool {
	if len(seq) == 0 {
		return false
	}
	var buf [16]int32
	fail := buf[:0]
	if len(seq) > len(buf) {
		fail = make([]int32, 0, len(seq))
	}
	// fail[i] is the length of the longest proper prefix of seq[:i+1] that is also its suffix.
	fail = append(fail, 0)
	for i, k := 1, int32(0); i < len(seq); i++ {
		for k > 0 && seq[i] != seq[k] {
			k = fail[k-1]
		}
		if seq[i] == seq[k] {
			k++
		}
		fail = append(fail, k)
	}
	k := int32(0)
	for _, s := range stems {
		for k > 0 && s != seq[k] {
			k = fail[k-1]
		}
		if s == seq[k] {
			k++
		}
		if int(k) == len(seq) {
			return true
		}
	}
	return false
}

// queryTexts holds the long questions of the queries being matched, keyed by
// the address of their bytes, so that the words of such a text are computed
// once for all the query's routes and calls, whatever other queries run
// meanwhile. The cost check relies on it: it charges tokenising `text` to
// each call only up to sharedWordsMinBytes.
//
// A question up to that size is not registered (a lock and a map update per
// query cost more than tokenising it again in the rare case lastWords has
// moved on to another query's text).
var queryTexts = struct {
	sync.RWMutex
	m map[*byte]*queryText
}{m: map[*byte]*queryText{}}

// queryText is the question of one query; it lives in the query's activation.
type queryText struct {
	text string
	once sync.Once
	w    *words
}

// sharedWordsMinBytes is the size above which a question's words are
// registered in queryTexts.
const sharedWordsMinBytes = 256

// lastWords keeps the words of the last text tokenised: a repeated question
// is not tokenised again, and a look-up for the current question usually
// ends here without taking the registry's lock.
var lastWords atomic.Pointer[textWords]

type textWords struct {
	text string
	w    *words
}

func (q *queryText) words() *words {
	q.once.Do(func() {
		if l := lastWords.Load(); l != nil && l.text == q.text {
			q.w = l.w
			return
		}
		q.w = newWords(q.text)
		lastWords.Store(&textWords{q.text, q.w})
	})
	return q.w
}

// register makes the words of a long question shared until unregister.
func (q *queryText) register(text string) {
	if len(text) <= sharedWordsMinBytes {
		return
	}
	q.text = text
	queryTexts.Lock()
	queryTexts.m[unsafe.StringData(text)] = q
	queryTexts.Unlock()
}

func (q *queryText) unregister() {
	if q.text == "" {
		return
	}
	key := unsafe.StringData(q.text)
	queryTexts.Lock()
	if queryTexts.m[key] == q {
		delete(queryTexts.m, key)
	}
	queryTexts.Unlock()
}

// sameString reports whether a and b are the same string (address and
// length), which is cheaper than comparing their bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// registeredText returns the entry of a query's text, if s is one.
func registeredText(s string) *queryText {
	if s == "" {
		return nil
	}
	queryTexts.RLock()
	q := queryTexts.m[unsafe.StringData(s)]
	queryTexts.RUnlock()
	if q != nil && len(q.text) == len(s) {
		return q
	}
	return nil
}

func wordsOf(s string) *words {
	if l := lastWords.Load(); l != nil && sameString(l.text, s) {
		return l.w
	}
	if len(s) > sharedWordsMinBytes {
		if q := registeredText(s); q != nil {
			return q.words()
		}
	}
	w := newWords(s)
	lastWords.Store(&textWords{s, w})
	return w
}

// containsWords matches whole words after the scorer's tokenisation (so
// "vacations" matches "vacation"); an entry of several words matches that
// sequence of words.
func containsWords(textVal, wordsVal ref.Val, all bool) ref.Val {
	fn := "containsAnyWord"
	if all {
		fn = "containsAllWords"
	}
	text, ok := textVal.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(textVal)
	}
	list, ok := wordsVal.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(wordsVal)
	}
	n, ok := list.Size().(types.Int)
	if !ok {
		return types.NewErr("%s: list has no size", fn)
	}
	var w *words
	// Index instead of Iterator: no iterator allocation per call.
	for i := types.Int(0); i < n; i++ {
		e, ok := list.Get(i).(types.String)
		if !ok {
			return types.NewErr("%s: list elements must be strings", fn)
		}
		if len(e) > MaxWordEntryBytes {
			return types.NewErr("%s: list entry %d is %d bytes; entries are limited to %d bytes", fn, i, len(e), MaxWordEntryBytes)
		}
		if w == nil {
			w = wordsOf(string(text))
		}
		found := w.containsEntry(string(e))
		if found && !all {
			return types.True
		}
		if !found && all {
			return types.False
		}
	}
	return types.Bool(all && n > 0)
}

// resetCompiledCache empties the program cache (benchmarks of cold compiles).
func resetCompiledCache() { compiled.Purge() }
