// Package secrets finds credentials in session text and masks them before
// the text is stored, so that no prompt, pack, drill-down, API answer, store
// or log built from it can hold one (docs/api.md §11.10).
//
// A value is replaced by "[secret:<rule id>]": "AKIA…" becomes
// "[secret:aws-access-key]", "password=hunter2" becomes
// "password=[secret:password]". What is masked is the value only: the
// name it was assigned to, a URL's user and host, a header's scheme stay, so
// the text still reads.
//
// The rules are hand-written matchers, not regular expressions: the text is
// read once, word by word, and a rule runs only where its literal anchor
// (a provider prefix such as "ghp_", "-----BEGIN ", a key name before "="
// or ":", "://") starts a word. A text without secrets costs one pass and
// no allocation. Each rule names the published format it follows (rules.go).
package secrets

import (
	"slices"
	"sort"
	"strings"
)

// maskPrefix starts every mask; a mask of an earlier pass is never masked
// again, so Mask is idempotent.
const maskPrefix = "[secret:"

// MaxGrowth bounds what masking adds: the masked text is at most
// MaxGrowth times as long as the input. The worst case is a URL of a
// one-byte password, "x://:p@" (7 bytes), masked to 27 bytes; an assigned
// value has at least 4 bytes after a name and a separator of 4 or more.
const MaxGrowth = 4

// A Finding is one masked value: the rule that matched and the value's byte
// range in the text given to Mask. The value itself is never kept.
type Finding struct {
	// Rule is the rule's id, as in the mask ("aws-access-key").
	Rule string
	// Start and End are byte offsets of the masked value in the input.
	Start, End int
}

// Rule describes one rule for documentation and tests.
type Rule struct {
	// ID names the rule in masks, findings, stats and metrics.
	ID string
	// Matches says what the rule masks.
	Matches string
	// Source names the published format the rule follows.
	Source string
}

// A Scanner masks secrets in text. It is safe for concurrent use. A nil
// *Scanner masks nothing: it is what `spec.sessions.secrets: Off` selects.
type Scanner struct{}

var defaultScanner = &Scanner{}

// Default returns the scanner with every rule of Rules.
func Default() *Scanner { return defaultScanner }

// Rules lists the rules in the order of their precedence when two match
// overlapping text (a provider format before a generic assignment).
func Rules() []Rule {
	out := make([]Rule, 0, numRules)
	for _, r := range ruleTable {
		out = append(out, Rule{ID: r.id, Matches: r.matches, Source: r.source})
	}
	slices.SortStableFunc(out, func(a, b Rule) int {
		return int(ruleTable[ruleIndex(a.ID)].prio) - int(ruleTable[ruleIndex(b.ID)].prio)
	})
	return out
}

func ruleIndex(id string) ruleID {
	for i, r := range ruleTable {
		if r.id == id {
			return ruleID(i)
		}
	}
	return numRules
}

// Mask returns text with every secret it finds replaced by its mask, and the
// findings in text order. When nothing is found it returns text itself and
// nil, without allocating. Masking masked text changes nothing.
func (sc *Scanner) Mask(text string) (string, []Finding) {
	if sc == nil || len(text) == 0 {
		return text, nil
	}
	spans := scan(text)
	if len(spans) == 0 {
		return text, nil
	}
	spans = settle(text, spans)
	out := render(text, spans)
	// A mask changes what is around it: the '@' or the blank that ended a
	// URL's authority may be gone, a name may now follow ']' instead of '/'.
	// The output is scanned again until it holds nothing more, so that
	// masking it once more changes nothing; what a later pass finds is
	// mapped back to the input and masked with the rest.
	for pass := 1; pass < maxPasses; pass++ {
		more := scan(out)
		if len(more) == 0 {
			break
		}
		spans = settle(text, append(spans, inputSpans(spans, more)...))
		out = render(text, spans)
	}
	return out, findings(spans)
}

// maxPasses bounds the scans of Mask. Texts with secrets need two (the
// second finds nothing); one in a million of the property test's texts
// needed three.
const maxPasses = 4

// inputSpans maps spans of the output that spans made of their input back
// to the input: a start inside a mask moves to the masked value's start,
// an end inside one to its end.
func inputSpans(spans, more []span) []span {
	// at[k] is where the mask of spans[k] starts in the output.
	at := make([]int, len(spans))
	shift := 0
	for k, sp := range spans {
		at[k] = sp.start + shift
		shift += maskLen(sp.rule) - (sp.end - sp.start)
	}
	in := func(p int, end bool) int {
		// The last mask that starts before p (at or before p for a start).
		k := sort.Search(len(spans), func(k int) bool { return at[k] > p || end && at[k] == p }) - 1
		switch {
		case k < 0:
			return p
		case p < at[k]+maskLen(spans[k].rule) || end && p == at[k]+maskLen(spans[k].rule):
			if end {
				return spans[k].end
			}
			return spans[k].start
		}
		return spans[k].end + p - at[k] - maskLen(spans[k].rule)
	}
	out := make([]span, len(more))
	for k, m := range more {
		out[k] = span{in(m.start, false), in(m.end, true), m.rule}
	}
	return out
}

func maskLen(r ruleID) int { return len(maskPrefix) + len(ruleTable[r].id) + 1 }

// MaskValue masks value as the value of a field called name: a fact's key
// and value, a metadata pair, a tool argument. When name is a credential's
// name ("password", "api_key", "GITHUB_TOKEN"; the rules of "password=…"
// assignments) the whole value is masked, unless it is a placeholder such as
// "" or "${VAR}"; otherwise value is masked as Mask masks it.
func (sc *Scanner) MaskValue(name, value string) (string, []Finding) {
	if sc == nil || len(value) == 0 {
		return value, nil
	}
	if r, t := classifyKey(name); t != tierNone {
		if r, ok := assignedSecret(r, t, value, "", true); ok {
			spans := []span{{0, len(value), r}}
			return render(value, spans), findings(spans)
		}
	}
	return sc.Mask(value)
}

// CountMasks counts the masks in text: what a pack reports of the secrets
// its entries held when written.
func CountMasks(text string) int { return strings.Count(text, maskPrefix) }

// Counts adds the findings per rule id to counts (created when nil) and
// returns it: what pack stats and metrics report, never a value.
func Counts(counts map[string]int, found []Finding) map[string]int {
	if len(found) == 0 {
		return counts
	}
	if counts == nil {
		counts = make(map[string]int, len(found))
	}
	for _, f := range found {
		counts[f.Rule]++
	}
	return counts
}

// render replaces the sorted, disjoint spans of text by their masks.
func render(text string, spans []span) string {
	var b strings.Builder
	grow := len(text)
	for _, s := range spans {
		grow += maskLen(s.rule) - (s.end - s.start)
	}
	b.Grow(max(grow, 0))
	last := 0
	for _, s := range spans {
		b.WriteString(text[last:s.start])
		b.WriteString(maskPrefix)
		b.WriteString(ruleTable[s.rule].id)
		b.WriteByte(']')
		last = s.end
	}
	b.WriteString(text[last:])
	return b.String()
}

func findings(spans []span) []Finding {
	found := make([]Finding, len(spans))
	for i, s := range spans {
		found[i] = Finding{Rule: ruleTable[s.rule].id, Start: s.start, End: s.end}
	}
	return found
}
