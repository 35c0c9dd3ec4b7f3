package redact

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	tests := []struct {
		name, in, want string
		// gone must not appear in the output.
		gone string
	}{
		{"plain question", "How many vacation days do I get?", "How many vacation days do I get?", ""},
		{"url user part", "clone https://ghp_abc123@github.com/org/repo.git fails", "clone https://***@github.com/org/repo.git fails", "ghp_abc123"},
		{"named password", "my password=hunter2 does not work", "my password=*** does not work", "hunter2"},
		{"named api key with colon", `set api_key: "sk-proj-aa11" then`, `set api_key: "***" then`, "sk-proj-aa11"},
		{"authorization header", "Authorization: Bearer eyJhbGciOi.x.y fails", "Authorization: Bearer *** fails", "eyJhbGciOi"},
		{"bare bearer", "I sent bearer abc.def.ghi", "I sent bearer ***", "abc.def.ghi"},
		{"key-like run", "is AKIAIOSFODNN7EXAMPLEKEY1 valid?", "is *** valid?", "AKIAIOSFODNN7EXAMPLEKEY1"},
		{"long word without digits stays", "internationalizationization matters", "internationalizationization matters", ""},
		{"short code with digits stays", "ticket OPS-1234 is open", "ticket OPS-1234 is open", ""},
		// The session scanner's rules (issue 22): shorter than the key-like
		// run, and digits only.
		{"aws access key id", "is AKIAIOSFODNN7EXAMPLE mine?", "is [secret:aws-access-key] mine?", "AKIAIOSFODNN7EXAMPLE"},
		{"card number", "charge 4111 1111 1111 1111 again", "charge [secret:card-number] again", "4111 1111 1111 1111"},
		{"card number with dashes", "card 5500-0000-0000-0004 declined", "card [secret:card-number] declined", "5500-0000-0000-0004"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Text(tc.in)
			if got != tc.want {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if tc.gone != "" && strings.Contains(got, tc.gone) {
				t.Errorf("Text(%q) keeps %q", tc.in, tc.gone)
			}
		})
	}
}
