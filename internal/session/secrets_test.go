package session_test

import (
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/secrets"
	"github.com/contextrouter/contextrouter/internal/session"
)

// TestMaskSecrets: a write's texts, metadata values, fact values and
// episode texts are masked on copies (the caller's entries stay as they
// were), counted per rule; nil (secrets: Off) masks nothing.
func TestMaskSecrets(t *testing.T) {
	const aws = "AKIA" + "Q4R7T2W9Y5U1I3O6"
	token := "ghp_" + strings.Repeat("Zx8Cv7Bn6M", 3) + "aS4dF3"
	in := session.Delta{
		Items: []session.Item{
			{ID: "u1", Kind: session.KindUserTurn, Text: "nothing to hide"},
			{ID: "r1", Kind: session.KindToolResult, Text: "AWS_ACCESS_KEY_ID=" + aws, Metadata: map[string]string{"token": token, "tool": "env"}},
		},
		Facts:    []session.Fact{{Key: "api_key", Value: "kv-" + token[4:24]}, {Key: "country", Value: "Portugal"}},
		Episodes: []session.Episode{{ID: "e1", Text: "The user pasted " + token + " by mistake."}},
	}
	items, facts, eps := in.Items, in.Facts, in.Episodes
	d := in
	m := session.MaskSecrets(secrets.Default(), &d)
	if m.Total() != 4 || m["aws-access-key"] != 1 || m["github-token"] != 1 {
		t.Errorf("counts %v, want 4: aws-access-key, the metadata token, the api_key fact, github-token", m)
	}
	for name, got := range map[string]string{
		"item text": d.Items[1].Text, "metadata": d.Items[1].Metadata["token"], "fact": d.Facts[0].Value, "episode": d.Episodes[0].Text,
	} {
		if !strings.Contains(got, "[secret:") || strings.Contains(got, aws) || strings.Contains(got, token) {
			t.Errorf("%s not masked: %q", name, got)
		}
	}
	if d.Items[0].Text != "nothing to hide" || d.Items[1].Metadata["tool"] != "env" || d.Facts[1].Value != "Portugal" {
		t.Errorf("clean values changed: %+v %+v", d.Items, d.Facts)
	}
	// The caller's slices and maps are as written.
	if items[1].Text != "AWS_ACCESS_KEY_ID="+aws || items[1].Metadata["token"] != token || facts[0].Value != "kv-"+token[4:24] || !strings.Contains(eps[0].Text, token) {
		t.Error("MaskSecrets wrote to the caller's entries")
	}
	off := in
	if m := session.MaskSecrets(nil, &off); m != nil || off.Items[1].Text != in.Items[1].Text {
		t.Errorf("nil scanner masked: %v", m)
	}
	s := &session.Session{Items: []session.Item{{ID: "a", Kind: session.KindUserTurn, Text: "plain"}}}
	if got, m := session.MaskSessionSecrets(secrets.Default(), s); got != s || m != nil {
		t.Errorf("a clean session was copied or counted: %v", m)
	}
}

// TestPolicySecrets: spec.sessions.secrets picks the scanner.
func TestPolicySecrets(t *testing.T) {
	for mode, want := range map[v1alpha1.SessionSecretsMode]bool{"": true, v1alpha1.SessionSecretsMask: true, v1alpha1.SessionSecretsOff: false} {
		spec := &v1alpha1.ContextRouterSpec{Sessions: v1alpha1.SessionsSpec{Secrets: mode}}
		p, err := session.NewPolicy(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Secrets() != nil; got != want {
			t.Errorf("secrets %q: scanning %v, want %v", mode, got, want)
		}
	}
}
