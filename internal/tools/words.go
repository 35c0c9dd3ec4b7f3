package tools

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// nameWords splits a tool name into words: create_invoice, createInvoice,
// create-invoice and create.invoice all give "create invoice"; an acronym
// stays whole before a capitalised word (HTTPServer → "HTTP Server") and
// letters part from digits (AI2sql → "AI 2 sql").
func nameWords(name string) string {
	var b strings.Builder
	b.Grow(len(name) + 8)
	var prev rune
	for i, r := range name {
		if r == '_' || r == '-' || r == '.' || unicode.IsSpace(r) {
			b.WriteByte(' ')
			prev = ' '
			continue
		}
		if prev != 0 && prev != ' ' && boundary(prev, r, name[i+utf8.RuneLen(r):]) {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

// boundary reports whether a word starts at r, after prev; rest is what
// follows r.
func boundary(prev, r rune, rest string) bool {
	switch {
	case unicode.IsLower(prev) && unicode.IsUpper(r):
		return true // createInvoice
	case unicode.IsUpper(prev) && unicode.IsUpper(r):
		// HTTPServer: the S starts a word when a lower-case letter follows.
		next, _ := utf8.DecodeRuneInString(rest)
		return unicode.IsLower(next)
	case unicode.IsLetter(prev) && unicode.IsDigit(r), unicode.IsDigit(prev) && unicode.IsLetter(r):
		return true // AI2sql, web3
	}
	return false
}
