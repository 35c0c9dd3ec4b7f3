package convert

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The theaios condition language (docs/api.md §7, convert): or, and, not,
// parentheses, comparisons and the word operators, over the fields text,
// agent, tags and metadata keys, and $variables. parseCondition builds a
// small tree; translate prints it as CEL.

// condError is a condition problem at a character (0-based rune offset) of the expression.
type condError struct {
	pos int
	msg string
}

func (e *condError) Error() string { return e.msg }

type tokKind int

const (
	tEOF tokKind = iota
	tString
	tNumber
	tWord // identifiers, keywords and dotted paths
	tVar  // $name
	tOp   // == != < <= > >=
	tPunct
)

type token struct {
	kind tokKind
	text string // the word, operator or punctuation; the decoded string
	num  float64
	pos  int
}

func lex(src string) ([]token, error) {
	var toks []token
	rs := []rune(src)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '"' || r == '\'':
			s, n, err := lexString(rs, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tString, text: s, pos: i})
			i += n
		case r >= '0' && r <= '9' || (r == '-' || r == '.') && i+1 < len(rs) && rs[i+1] >= '0' && rs[i+1] <= '9':
			j := i + 1
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == '.' || rs[j] == 'e' || rs[j] == 'E' ||
				(rs[j] == '-' || rs[j] == '+') && (rs[j-1] == 'e' || rs[j-1] == 'E')) {
				j++
			}
			f, err := strconv.ParseFloat(string(rs[i:j]), 64)
			if err != nil {
				return nil, &condError{i, fmt.Sprintf("invalid number %q", string(rs[i:j]))}
			}
			toks = append(toks, token{kind: tNumber, text: string(rs[i:j]), num: f, pos: i})
			i = j
		case r == '$' || isWordStart(r):
			j := i + 1
			for j < len(rs) && (isWordStart(rs[j]) || rs[j] >= '0' && rs[j] <= '9' || rs[j] == '.') {
				j++
			}
			if r == '$' {
				if j == i+1 {
					return nil, &condError{i, "a $ must be followed by a variable name"}
				}
				toks = append(toks, token{kind: tVar, text: string(rs[i+1 : j]), pos: i})
			} else {
				toks = append(toks, token{kind: tWord, text: string(rs[i:j]), pos: i})
			}
			i = j
		case strings.ContainsRune("=!<>", r):
			if i+1 < len(rs) && rs[i+1] == '=' {
				toks = append(toks, token{kind: tOp, text: string(rs[i : i+2]), pos: i})
				i += 2
			} else if r == '<' || r == '>' {
				toks = append(toks, token{kind: tOp, text: string(r), pos: i})
				i++
			} else {
				return nil, &condError{i, fmt.Sprintf("unknown operator %q (comparisons are == != < <= > >=; use not for negation)", string(r))}
			}
		case strings.ContainsRune("()[],", r):
			toks = append(toks, token{kind: tPunct, text: string(r), pos: i})
			i++
		default:
			return nil, &condError{i, fmt.Sprintf("unexpected character %q", string(r))}
		}
	}
	return append(toks, token{kind: tEOF, pos: len(rs)}), nil
}

func isWordStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }

// lexString reads a quoted string with backslash escapes (\n, \t, \\, \", \', \uXXXX).
func lexString(rs []rune, start int) (string, int, error) {
	q := rs[start]
	var b strings.Builder
	for i := start + 1; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == q:
			return b.String(), i - start + 1, nil
		case r == '\\' && i+1 < len(rs):
			i++
			switch e := rs[i]; e {
			case 'n':
				b.WriteRune('\n')
			case 't':
				b.WriteRune('\t')
			case 'r':
				b.WriteRune('\r')
			case 'u':
				if i+4 < len(rs) {
					if v, err := strconv.ParseUint(string(rs[i+1:i+5]), 16, 32); err == nil && utf8.ValidRune(rune(v)) {
						b.WriteRune(rune(v))
						i += 4
						continue
					}
				}
				return "", 0, &condError{i - 1, `invalid \u escape: want four hex digits`}
			default:
				b.WriteRune(e) // \\ \" \' and any other escaped character stand for themselves
			}
		default:
			b.WriteRune(r)
		}
	}
	return "", 0, &condError{start, "unclosed string"}
}

// Condition tree.
type (
	node   interface{ position() int }
	boolOp struct {
		op   string
		l, r node
		pos  int
	} // "and", "or"
	notOp struct {
		x   node
		pos int
	}
	compare struct {
		op   string
		l, r operand
		pos  int
	}
	truth   struct{ x operand }
	operand struct {
		kind    string // "field", "var", "string", "number", "bool", "null", "list"
		name    string // field path or variable name
		str     string
		num     float64
		boolean bool
		list    []operand
		pos     int
	}
)

func (n *boolOp) position() int  { return n.pos }
func (n *notOp) position() int   { return n.pos }
func (n *compare) position() int { return n.pos }
func (n *truth) position() int   { return n.x.pos }

// wordOps are the operators written as words; "not in" is two words.
var wordOps = []string{"contains", "starts_with", "ends_with", "matches", "in", "not in"}

type parser struct {
	toks []token
	i    int
}

func parseCondition(src string) (node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.unexpected(t)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) isWord(w string) bool {
	t := p.peek()
	return t.kind == tWord && strings.EqualFold(t.text, w)
}

func (p *parser) unexpected(t token) error {
	switch t.kind {
	case tEOF:
		return &condError{t.pos, "unexpected end of the condition"}
	case tWord:
		return &condError{t.pos, fmt.Sprintf("unknown operator %q (known: and, or, not, ==, !=, <, <=, >, >=, %s)", t.text, strings.Join(wordOps, ", "))}
	case tString:
		return &condError{t.pos, fmt.Sprintf("unexpected string %q: an operator is missing", t.text)}
	}
	return &condError{t.pos, fmt.Sprintf("unexpected %q", t.text)}
}

func (p *parser) or() (node, error) {
	l, err := p.and()
	for err == nil && p.isWord("or") {
		pos := p.next().pos
		var r node
		if r, err = p.and(); err == nil {
			l = &boolOp{"or", l, r, pos}
		}
	}
	return l, err
}

func (p *parser) and() (node, error) {
	l, err := p.not()
	for err == nil && p.isWord("and") {
		pos := p.next().pos
		var r node
		if r, err = p.not(); err == nil {
			l = &boolOp{"and", l, r, pos}
		}
	}
	return l, err
}

func (p *parser) not() (node, error) {
	if p.isWord("not") {
		pos := p.next().pos
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &notOp{x, pos}, nil
	}
	if t := p.peek(); t.kind == tPunct && t.text == "(" {
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != tPunct || t.text != ")" {
			if t.kind == tEOF {
				return nil, &condError{t.pos, "unclosed parenthesis"}
			}
			return nil, p.unexpected(t)
		}
		return x, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (node, error) {
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	op := ""
	switch {
	case t.kind == tOp:
		op = t.text
	case t.kind == tWord:
		lw := strings.ToLower(t.text)
		switch lw {
		case "contains", "starts_with", "ends_with", "matches", "in":
			op = lw
		case "not":
			if n := p.toks[p.i+1]; n.kind == tWord && strings.EqualFold(n.text, "in") {
				p.next()
				op = "not in"
			}
		case "and", "or":
		default:
			return nil, p.unexpected(t)
		}
	case t.kind == tString || t.kind == tNumber || t.kind == tVar:
		return nil, p.unexpected(t)
	}
	if op == "" {
		return &truth{l}, nil
	}
	p.next()
	r, err := p.operand()
	if err != nil {
		return nil, err
	}
	return &compare{op, l, r, t.pos}, nil
}

func (p *parser) operand() (operand, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return operand{kind: "string", str: t.text, pos: t.pos}, nil
	case tNumber:
		return operand{kind: "number", num: t.num, pos: t.pos}, nil
	case tVar:
		return operand{kind: "var", name: t.text, pos: t.pos}, nil
	case tWord:
		switch strings.ToLower(t.text) {
		case "true", "false":
			return operand{kind: "bool", boolean: strings.EqualFold(t.text, "true"), pos: t.pos}, nil
		case "null", "none":
			return operand{kind: "null", pos: t.pos}, nil
		case "and", "or", "not", "in", "contains", "starts_with", "ends_with", "matches":
			return operand{}, &condError{t.pos, fmt.Sprintf("expected a value before %q", t.text)}
		}
		o := operand{kind: "field", name: t.text, pos: t.pos}
		// metadata["key"]
		if n := p.peek(); t.text == "metadata" && n.kind == tPunct && n.text == "[" {
			p.next()
			k := p.next()
			if k.kind != tString {
				return operand{}, &condError{k.pos, `metadata[...] takes a quoted key`}
			}
			if c := p.next(); c.kind != tPunct || c.text != "]" {
				return operand{}, &condError{c.pos, "expected ]"}
			}
			o.name = "metadata." + k.text
		}
		return o, nil
	case tPunct:
		if t.text == "[" {
			o := operand{kind: "list", pos: t.pos}
			for {
				if n := p.peek(); n.kind == tPunct && n.text == "]" {
					p.next()
					return o, nil
				}
				e, err := p.operand()
				if err != nil {
					return operand{}, err
				}
				o.list = append(o.list, e)
				if n := p.peek(); n.kind == tPunct && n.text == "," {
					p.next()
				} else if n.kind != tPunct || n.text != "]" {
					if n.kind == tEOF {
						return operand{}, &condError{t.pos, "unclosed list"}
					}
					return operand{}, &condError{n.pos, "expected , or ] in a list"}
				}
			}
		}
	}
	if t.kind == tEOF {
		return operand{}, &condError{t.pos, "unexpected end of the condition: a value is missing"}
	}
	return operand{}, &condError{t.pos, fmt.Sprintf("unexpected %q: expected a value", t.text)}
}

// Translation to CEL.

// untranslatable is a condition that parses but has no CEL equivalent.
type untranslatable struct{ msg string }

func (e *untranslatable) Error() string { return e.msg }

type celType int

const (
	cString celType = iota
	cList
	cNumber
	cBool
	cNull
	cDyn
)

// value is a translated operand.
type value struct {
	cel  string
	typ  celType
	meta string // the metadata key, when the operand is one (it may be missing)
}

// Precedence of a CEL expression, for parentheses: 1 ||, 2 &&, 3 relations, 4 atoms.
type celExpr struct {
	s    string
	prec int
}

type translator struct {
	vars  map[string]any // the config's variables
	words bool
	notes []string // what translates, but may not behave the same
}

// defaultAgentNote is said where theaios's name for "no agent" is used.
const defaultAgentNote = `theaios calls a query without an agent "default"; here its agent is empty: callers must send agent "default" for this to match`

func (tr *translator) translate(n node) (celExpr, error) {
	switch n := n.(type) {
	case *boolOp:
		if n.op == "or" && tr.words {
			return tr.wordsOr(n)
		}
		l, err := tr.translate(n.l)
		if err != nil {
			return celExpr{}, err
		}
		r, err := tr.translate(n.r)
		if err != nil {
			return celExpr{}, err
		}
		op, prec := " || ", 1
		if n.op == "and" {
			op, prec = " && ", 2
		}
		return celExpr{paren(l, prec) + op + paren(r, prec+1), prec}, nil
	case *notOp:
		x, err := tr.translate(n.x)
		if err != nil {
			return celExpr{}, err
		}
		return celExpr{"!" + paren(x, 4), 4}, nil
	case *truth:
		v, err := tr.value(n.x)
		if err != nil {
			return celExpr{}, err
		}
		return truthOf(v), nil
	case *compare:
		return tr.compare(n)
	}
	panic(fmt.Sprintf("convert: unknown condition node %T", n))
}

func paren(e celExpr, min int) string {
	if e.prec < min {
		return "(" + e.s + ")"
	}
	return e.s
}

func quote(s string) string { return strconv.Quote(s) }

func number(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

var celIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (tr *translator) value(o operand) (value, error) {
	switch o.kind {
	case "string":
		return value{cel: quote(o.str), typ: cString}, nil
	case "number":
		return value{cel: number(o.num), typ: cNumber}, nil
	case "bool":
		return value{cel: strconv.FormatBool(o.boolean), typ: cBool}, nil
	case "null":
		return value{cel: "null", typ: cNull}, nil
	case "list":
		parts := make([]string, len(o.list))
		for i, e := range o.list {
			v, err := tr.value(e)
			if err != nil {
				return value{}, err
			}
			parts[i] = v.cel
		}
		return value{cel: "[" + strings.Join(parts, ", ") + "]", typ: cList}, nil
	case "var":
		v, ok := tr.vars[o.name]
		if !ok {
			return value{}, &condError{o.pos, fmt.Sprintf("$%s is not defined in variables", o.name)}
		}
		ref := "vars." + o.name
		if !celIdent.MatchString(o.name) {
			ref = "vars[" + quote(o.name) + "]"
		}
		return value{cel: ref, typ: typeOf(v)}, nil
	}
	// A field.
	switch o.name {
	case "text", "agent":
		return value{cel: o.name, typ: cString}, nil
	case "tags":
		return value{cel: "tags", typ: cList}, nil
	}
	key := o.name
	if k, ok := strings.CutPrefix(key, "metadata."); ok {
		key = k
	}
	if key == "" || strings.Contains(key, ".") {
		return value{}, &untranslatable{fmt.Sprintf("%q: request metadata here is a flat map of strings, so a dotted path has no equivalent", o.name)}
	}
	return value{cel: "metadata[" + quote(key) + "]", typ: cString, meta: key}, nil
}

func typeOf(v any) celType {
	switch v.(type) {
	case string:
		return cString
	case []any:
		return cList
	case int, int64, uint64, float64:
		return cNumber
	case bool:
		return cBool
	case nil:
		return cNull
	}
	return cDyn
}

// truthOf is a value used alone as a condition, with Python's truthiness.
func truthOf(v value) celExpr {
	switch {
	case v.meta != "":
		return celExpr{fmt.Sprintf("(%s in metadata && %s != \"\")", quote(v.meta), v.cel), 4}
	case v.typ == cString:
		return celExpr{v.cel + ` != ""`, 3}
	case v.typ == cList:
		return celExpr{"size(" + v.cel + ") > 0", 3}
	case v.typ == cNumber:
		return celExpr{v.cel + " != 0.0", 3}
	case v.typ == cNull:
		return celExpr{"false", 4}
	case v.cel == "true" || v.cel == "false":
		return celExpr{v.cel, 4}
	}
	return celExpr{v.cel + " == true", 3}
}

func (tr *translator) compare(n *compare) (celExpr, error) {
	l, err := tr.value(n.l)
	if err != nil {
		return celExpr{}, err
	}
	r, err := tr.value(n.r)
	if err != nil {
		return celExpr{}, err
	}
	if (n.l.kind == "field" && n.l.name == "agent" && n.r.kind == "string" && n.r.str == "default") ||
		(n.r.kind == "field" && n.r.name == "agent" && n.l.kind == "string" && n.l.str == "default") {
		tr.notes = append(tr.notes, defaultAgentNote)
	}
	negative := n.op == "!=" || n.op == "not in"
	// null: a presence test for metadata keys; nothing else is ever null.
	if l.typ == cNull || r.typ == cNull {
		v := l
		if l.typ == cNull {
			v = r
		}
		if n.op != "==" && n.op != "!=" {
			return celExpr{}, &untranslatable{fmt.Sprintf("%s with null is always false in theaios; write the condition without it", n.op)}
		}
		switch {
		case v.meta != "":
			if negative {
				return celExpr{quote(v.meta) + " in metadata", 3}, nil
			}
			return celExpr{"!(" + quote(v.meta) + " in metadata)", 4}, nil
		case v.typ == cNull:
			return celExpr{strconv.FormatBool(!negative), 4}, nil
		}
		return celExpr{strconv.FormatBool(negative), 4}, nil
	}
	// A metadata value compared with a number is read as one.
	if l.meta != "" && r.typ == cNumber {
		l.cel, l.typ = "double("+l.cel+")", cNumber
	}
	if r.meta != "" && l.typ == cNumber {
		r.cel, r.typ = "double("+r.cel+")", cNumber
	}
	var core celExpr
	switch n.op {
	case "==", "!=", "<", "<=", ">", ">=":
		core = celExpr{l.cel + " " + n.op + " " + r.cel, 3}
	case "contains":
		core, err = tr.contains(l, r)
	case "in", "not in":
		core, err = tr.contains(r, l)
		if err == nil && n.op == "not in" {
			core = celExpr{"!" + paren(core, 4), 4}
		}
	case "starts_with", "ends_with":
		if l.typ != cString && l.typ != cDyn || r.typ != cString && r.typ != cDyn {
			return celExpr{}, &untranslatable{n.op + " compares strings"}
		}
		fn := map[string]string{"starts_with": "startsWith", "ends_with": "endsWith"}[n.op]
		core = celExpr{l.cel + "." + fn + "(" + r.cel + ")", 4}
	case "matches":
		if n.r.kind != "string" {
			return celExpr{}, &untranslatable{"matches with a named matcher has no equivalent: write the regular expression as a string"}
		}
		if _, err := regexp.Compile(n.r.str); err != nil {
			return celExpr{}, &untranslatable{fmt.Sprintf("the pattern %q is not RE2: %v", n.r.str, err)}
		}
		core = celExpr{l.cel + ".matches(" + r.cel + ")", 4}
	}
	if err != nil {
		return celExpr{}, err
	}
	// Guard reads of metadata keys: a missing key is "different" (theaios reads None).
	var keys []string
	for _, v := range []value{l, r} {
		if v.meta != "" && (len(keys) == 0 || keys[0] != v.meta) {
			keys = append(keys, v.meta)
		}
	}
	if len(keys) == 0 {
		return core, nil
	}
	var guard []string
	for _, k := range keys {
		if negative {
			guard = append(guard, "!("+quote(k)+" in metadata)")
		} else {
			guard = append(guard, quote(k)+" in metadata")
		}
	}
	if negative {
		return celExpr{"(" + strings.Join(guard, " || ") + " || " + paren(core, 2) + ")", 4}, nil
	}
	return celExpr{"(" + strings.Join(guard, " && ") + " && " + paren(core, 3) + ")", 4}, nil
}

// contains is "hay contains needle": list membership or a substring.
func (tr *translator) contains(hay, needle value) (celExpr, error) {
	switch hay.typ {
	case cList:
		return celExpr{needle.cel + " in " + hay.cel, 3}, nil
	case cString, cDyn:
		if needle.typ != cString && needle.typ != cDyn {
			return celExpr{}, &untranslatable{"contains on a string needs a string"}
		}
		if tr.words && needle.typ == cString {
			return celExpr{"containsAnyWord(" + hay.cel + ", [" + needle.cel + "])", 4}, nil
		}
		return celExpr{hay.cel + ".contains(" + needle.cel + ")", 4}, nil
	}
	return celExpr{}, &untranslatable{"contains needs a string or a list on its left"}
}

// wordsOr translates a chain of or under --words, merging neighbouring
// word tests of one text into one call: text contains "pto" or text
// contains "vacation" is containsAnyWord(text, ["pto", "vacation"]).
func (tr *translator) wordsOr(n *boolOp) (celExpr, error) {
	var terms []node
	var flatten func(x node)
	flatten = func(x node) {
		if b, ok := x.(*boolOp); ok && b.op == "or" {
			flatten(b.l)
			flatten(b.r)
			return
		}
		terms = append(terms, x)
	}
	flatten(n)
	var parts []string
	lastHay, words := "", []string(nil)
	flush := func() {
		if len(words) > 0 {
			parts = append(parts, "containsAnyWord("+lastHay+", ["+strings.Join(words, ", ")+"])")
		}
		lastHay, words = "", nil
	}
	for _, x := range terms {
		if hay, needle, ok := tr.wordTest(x); ok {
			if hay != lastHay {
				flush()
				lastHay = hay
			}
			words = append(words, needle)
			continue
		}
		flush()
		e, err := tr.translate(x)
		if err != nil {
			return celExpr{}, err
		}
		parts = append(parts, paren(e, 2))
	}
	flush()
	if len(parts) == 1 {
		return celExpr{parts[0], 4}, nil
	}
	return celExpr{strings.Join(parts, " || "), 1}, nil
}

// wordTest reports whether x is "<string field> contains <string literal>"
// (or the literal in the field), which --words makes a word test.
func (tr *translator) wordTest(x node) (hay, needle string, ok bool) {
	c, isCmp := x.(*compare)
	if !isCmp {
		return "", "", false
	}
	h, nd := c.l, c.r
	switch c.op {
	case "contains":
	case "in":
		h, nd = c.r, c.l
	default:
		return "", "", false
	}
	if nd.kind != "string" || h.kind != "field" || (h.name != "text" && h.name != "agent") {
		return "", "", false
	}
	return h.name, quote(nd.str), true
}
