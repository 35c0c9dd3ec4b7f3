package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

// benchText is an upstream error of about 1 KiB that echoes a credential.
var benchText = "git https://git.example.com/org/wiki.git (ref \"main\"): authentication required: " +
	strings.Repeat("<p>Access denied for this repository; check the token.</p> ", 15) +
	"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:ghp_BenchTok3n0123456789abcdef"))

// BenchmarkString is what one failing request costs: scrubbing a 1 KiB
// error of three secret values (a token, a password, an API key).
func BenchmarkString(b *testing.B) {
	secrets := []string{"ghp_BenchTok3n0123456789abcdef", "pa55/w+rd=bench", "kb-key/bench+value"}
	b.ReportAllocs()
	for b.Loop() {
		_ = String(benchText, secrets...)
	}
}

// BenchmarkScrubberGit is a git sync error's scrubbing: the Credentials of
// a token and a URL, compiled, over a 1 KiB error.
func BenchmarkScrubberGit(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var c Credentials
		c.AddURL("https://git.example.com/org/wiki.git")
		c.AddBasic("x-access-token", "ghp_BenchTok3n0123456789abcdef")
		_ = c.Scrubber().ErrorExcerpt(errText(benchText), 1024)
	}
}

// BenchmarkScrubberCompiled is the scan alone, the Scrubber compiled once.
func BenchmarkScrubberCompiled(b *testing.B) {
	var c Credentials
	c.AddBasic("x-access-token", "ghp_BenchTok3n0123456789abcdef")
	c.AddHeader("Bearer kb-key/bench+value", true)
	sc := c.Scrubber()
	b.ReportAllocs()
	for b.Loop() {
		_ = sc.String(benchText)
	}
}

type errText string

func (e errText) Error() string { return string(e) }
