package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://ghp_token123@github.com/org/repo.git", "https://***@github.com/org/repo.git"},
		{"https://x-access-token:ghp_token123@github.com/org/repo.git", "https://***@github.com/org/repo.git"},
		{"https://ghp%5Ftoken%2F123@github.com/org/repo.git", "https://***@github.com/org/repo.git"},
		{"https://us%40er:p%40ss@host:8443/r.git?x=1#f", "https://***@host:8443/r.git?x=1#f"},
		{"HTTP://tok@host", "HTTP://***@host"},
		{"ssh://git@host:2222/r.git", "ssh://***@host:2222/r.git"},
		{"file://user@localhost/srv/r.git", "file://***@localhost/srv/r.git"},
		{"git@github.com:org/repo.git", "***@github.com:org/repo.git"},
		{"https:ghp_token123@github.com/org/repo", "***@github.com/org/repo"},
		{"https://github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"https://github.com/org/a@b.git", "https://github.com/org/a@b.git"},
		{"https://host/search?q=a@b", "https://host/search?q=a@b"},
		{"/srv/git/a@b/repo", "/srv/git/a@b/repo"},
		{"github.com:org/repo.git", "github.com:org/repo.git"},
		{"", ""},
		// Malformed: nothing of the URL is shown.
		{"https://user:pa/ss@host/r.git", InvalidURL},
		{"https://user:secret@exa mple.com/", InvalidURL},
		{"https://user:secret@host/%zz", InvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := URL(tt.in); got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestURLSecrets(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"https://ghp_token123@github.com/r.git", []string{"ghp_token123"}},
		{"https://ghp%5Ftoken123@github.com/r.git", []string{"ghp_token123"}},
		{"https://alice:s3cr%2Fet@host/r.git", []string{"s3cr/et"}},
		{"https://x-access-token:s3cret@host/r.git", []string{"x-access-token", "s3cret"}},
		{"ssh://git@host/r.git", nil},
		{"https://host/r.git", nil},
		{"https://user:pa/ss@host/r.git", nil}, // does not parse: URL hides it whole
		{"git@host:r.git", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := URLSecrets(tt.in); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("URLSecrets(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	// The errors net/http and go-git really return, built from real values.
	_, getErr := http.Get("http://ghp_token123@127.0.0.1:1/org/repo.git/info/refs?service=git-upload-pack")
	if getErr == nil {
		t.Fatal("GET of port 1 succeeded")
	}
	urlErr := &url.Error{Op: "Get", URL: "https://user:p%40ss@host/x", Err: fs.ErrNotExist}

	tests := []struct {
		name    string
		in      string
		secrets []string
		want    string // exact, or "" to check only that secrets are gone
		gone    []string
	}{
		{name: "net/http error", in: getErr.Error(), gone: []string{"ghp_token123"}},
		{name: "url.Error", in: urlErr.Error(), want: `Get "https://***@host/x": file does not exist`},
		{name: "go-git status error", in: `unexpected requesting "https://tok@git.example.com/r.git/info/refs?service=git-upload-pack" status code: 500`,
			want: `unexpected requesting "https://***@git.example.com/r.git/info/refs?service=git-upload-pack" status code: 500`},
		{name: "several URLs", in: "a https://u:p@h1/x then ssh://git@h2:22/y.", want: "a https://***@h1/x then ssh://***@h2:22/y."},
		{name: "at sign in the path stays", in: "GET https://h/a@b: refused", want: "GET https://h/a@b: refused"},
		{name: "last at sign ends the user part", in: "https://a@b:c@host/r", want: "https://***@host/r"},
		{name: "secret plain", in: "auth failed for sk-abc/def", secrets: []string{"sk-abc/def"}, want: "auth failed for ***"},
		{name: "secret escaped", in: "x sk-abc%2Fdef y sk-abc%2Fdef z", secrets: []string{"sk-abc/def"}, want: "x *** y *** z"},
		{name: "secret quoted", in: `key "a\"b"`, secrets: []string{`a"b`}, want: `key "***"`},
		{name: "longer secret first", in: "token abcdef", secrets: []string{"abc", "abcdef"}, want: "token ***"},
		{name: "empty secret ignored", in: "plain text", secrets: []string{""}, want: "plain text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in, tt.secrets...)
			if tt.want != "" && got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, g := range append(tt.gone, tt.secrets...) {
				if g != "" && strings.Contains(got, g) {
					t.Errorf("String(%q) = %q still holds %q", tt.in, got, g)
				}
			}
		})
	}
}

func TestError(t *testing.T) {
	base := fmt.Errorf("fetch https://tok3n@host/r.git: %w", fs.ErrPermission)
	err := Error(base, "tok3n")
	if got := err.Error(); got != "fetch https://***@host/r.git: permission denied" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("the scrubbed error lost its chain")
	}
	clean := errors.New("nothing secret")
	if Error(clean, "tok3n") != clean {
		t.Error("an error with nothing to scrub was wrapped")
	}
	if Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}

func TestParseError(t *testing.T) {
	for _, raw := range []string{"https://user:tok/en@host/", "https://user:secret@exa mple.com/", "https://h/%zz-secret"} {
		_, err := url.Parse(raw)
		if err == nil {
			t.Fatalf("%q parsed", raw)
		}
		msg := ParseError(err)
		if msg == "" || strings.Contains(msg, "tok") || strings.Contains(msg, "secret") || strings.Contains(msg, "user") || strings.Contains(msg, "%zz") {
			t.Errorf("ParseError(%q) = %q", raw, msg)
		}
	}
}
