package secrets

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Values of the exact-output table: fixed, in real formats, never real.
const (
	awsID     = "AKIAQX4Z7Y2W3V5U6T7R"
	awsSecret = "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"
	ghToken   = "ghp_Zk3Qw8Vn2Lr5Tx7Pb9Mc4Hd6Jf1Gs0Ya8Ue3I"
	jwtToken  = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmVfMTIzNDU2Nzg"
)

func TestMask(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Provider formats: the whole token; a word boundary on each side.
		{"aws key id", "id " + awsID + ".", "id [secret:aws-access-key]."},
		{"aws key id inside a word", "x" + awsID + " " + awsID + "X", "x" + awsID + " " + awsID + "X"},
		{"aws key id too short", "AKIAQX4Z7Y2W3V5U6T7", "AKIAQX4Z7Y2W3V5U6T7"},
		{"aws key id lower case", "AKIAqx4z7y2w3v5u6t7r", "AKIAqx4z7y2w3v5u6t7r"},
		{"escaped newline before a key", `"a\n` + awsID + `"`, `"a\n[secret:aws-access-key]"`},
		{"github token length", "ghp_" + strings.Repeat("a1", 17), "ghp_" + strings.Repeat("a1", 17)},
		{"sendgrid parts", "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG ok", "[secret:sendgrid-key] ok"},
		{"sendgrid wrong part length", "SG.abc.def", "SG.abc.def"},
		{"gitlab routable token", "glpat-abcdefghij0123456789.01.abc123de rest", "[secret:gitlab-token] rest"},
		{"gitlab token at a sentence end", "use glpat-abcdefghij0123456789. Then", "use [secret:gitlab-token]. Then"},
		{"slack webhook keeps the host", "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefABCDEF012345678901 ok",
			"https://hooks.slack.com/services/[secret:slack-webhook] ok"},
		{"telegram in a bot URL", "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9/getMe",
			"https://api.telegram.org/bot[secret:telegram-bot-token]/getMe"},
		{"jwt", "t=" + jwtToken + " x", "t=[secret:jwt] x"},
		{"jwt with an empty signature", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0In0. x", "[secret:jwt] x"},
		{"one base64 part is no jwt", "eyJhbGciOiJIUzI1NiJ9 x", "eyJhbGciOiJIUzI1NiJ9 x"},
		{"openai key needs mixed case", "sk-" + strings.Repeat("abc", 12), "sk-" + strings.Repeat("abc", 12)},

		// Private keys: the block, BEGIN through END, whatever its lines.
		{"pem block", "a\n-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAbc\n-----END PRIVATE KEY-----\nb",
			"a\n[secret:private-key]\nb"},
		{"pem without END", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx0123456789abcdef\nMIIEowIBAAKCAQEAx0123456789abcdef\nabc=\nThe rest was cut.",
			"[secret:private-key]\nThe rest was cut."},
		{"encrypted pem headers", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D\n\nMIIEowIBAAKCAQEAx0123456789abcdef\n...",
			"[secret:private-key]\n..."},
		{"pgp private key block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0123456789abcdef\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----",
			"[secret:private-key]"},
		{"certificate stays", "-----BEGIN CERTIFICATE-----\nMIIB0123456789abcdef\n-----END CERTIFICATE-----",
			"-----BEGIN CERTIFICATE-----\nMIIB0123456789abcdef\n-----END CERTIFICATE-----"},

		// Cards: network prefix and length, Luhn, grouping.
		{"visa", "card 4111111111111111.", "card [secret:card-number]."},
		{"visa grouped then a year", "4111 1111 1111 1111 2027", "[secret:card-number] 2027"},
		{"amex grouped", "3782-822463-10005", "[secret:card-number]"},
		{"luhn fails", "4111111111111112", "4111111111111112"},
		{"unknown network", "9111111111111111", "9111111111111111"},
		{"too long for a card", "41111111111111111111", "41111111111111111111"},
		{"decimal digits", "pi=3.4111111111111111", "pi=3.4111111111111111"},
		{"mixed separators", "4111 1111-1111 1111", "4111 1111-1111 1111"},

		// Headers: the scheme stays, the credentials go.
		{"authorization bearer", "Authorization: Bearer abcdef0123456789xyz\nHost: x", "Authorization: Bearer [secret:authorization]\nHost: x"},
		{"authorization bearer jwt", "authorization: bearer " + jwtToken, "authorization: bearer [secret:jwt]"},
		{"authorization digest", `Authorization: Digest username="bob", response="6629fae49393a05397450978507c4ef1"` + "\nX: y",
			"Authorization: Digest [secret:authorization]\nX: y"},
		{"authorization without scheme", "Authorization: 0123456789abcdef", "Authorization: [secret:authorization]"},
		{"authorization in JSON", `{"Authorization": "Basic dXNlcjpwYXNzd29yZA==", "a": 1}`, `{"Authorization": "Basic [secret:authorization]", "a": 1}`},
		{"authorization quoted in a shell", `curl -H 'Authorization: Bearer abcdef0123456789xyz' -d x`, `curl -H 'Authorization: Bearer [secret:authorization]' -d x`},
		{"proxy authorization", "Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "Proxy-Authorization: Basic [secret:authorization]"},
		{"bare bearer", `header="Bearer abcdef0123456789xyz"`, `header="Bearer [secret:authorization]"`},
		{"bearer prose", "use a Bearer token here", "use a Bearer token here"},

		// URLs: the password only.
		{"url password", "postgres://app:s3cret!@db:5432/x", "postgres://app:[secret:url-password]@db:5432/x"},
		{"url password with # and @", "redis://u:p#a@ss@cache/0", "redis://u:[secret:url-password]@cache/0"},
		{"url user only", "https://git@github.com/org/repo", "https://git@github.com/org/repo"},
		{"url @ in the path", "https://host/a:b@c", "https://host/a:b@c"},
		{"url placeholder password", "postgres://user:password@localhost/db", "postgres://user:password@localhost/db"},
		{"url variable password", "postgres://user:${PGPASSWORD}@localhost/db", "postgres://user:${PGPASSWORD}@localhost/db"},

		// Assignments: the value only, in each syntax.
		{"env", "DB_PASSWORD=hunter22\n", "DB_PASSWORD=[secret:password]\n"},
		{"yaml", "  password: hunter22 # prod\n", "  password: [secret:password] # prod\n"},
		{"json", `{"password":"hunter 22","x":1}`, `{"password":"[secret:password]","x":1}`},
		{"json escaped", `{\"password\":\"hunter22\"}`, `{\"password\":\"[secret:password]\"}`},
		{"python single quotes", `{'api_key': 'abcdef123456'}`, `{'api_key': '[secret:api-key]'}`},
		{"toml spaces", `client_secret = "abcdef123456"`, `client_secret = "[secret:secret]"`},
		{"go", `token := "abcdef123456"`, `token := "[secret:token]"`},
		{"ruby", `:password => "hunter22"`, `:password => "[secret:password]"`},
		{"query string", "?user=bob&password=hunter22&x=1", "?user=bob&password=[secret:password]&x=1"},
		{"connection string", "Server=db;User Id=sa;Password=hunter22;Encrypt=true", "Server=db;User Id=sa;Password=[secret:password];Encrypt=true"},
		{"password with a semicolon", "password=abc;def ok", "password=[secret:password] ok"},
		{"flag", "mysql --password hunter22 -h db", "mysql --password [secret:password] -h db"},
		{"flag with =", "mysql --password=hunter22 -h db", "mysql --password=[secret:password] -h db"},
		{"xml", "<password>hunter22</password>", "<password>[secret:password]</password>"},
		{"xml needs its closing tag", "see <token> below: abcdef123456</p>", "see <token> below: abcdef123456</p>"},
		{"curl user", "curl -u deploy:hunter22 https://x", "curl -u deploy:[secret:password] https://x"},
		{"curl user with =", "curl --user='deploy:hunter 22' https://x", "curl --user='deploy:[secret:password]' https://x"},
		{"docker user ids", "docker run -u 1000:1000 img", "docker run -u 1000:1000 img"},
		{"path ending in a name", `{"path": "/etc/passwd": 1}`, `{"path": "/etc/passwd": 1}`},
		{"go field", "Password: o.Password,", "Password: o.Password,"},
		{"go identifier value", "APIKey: testKey,", "APIKey: [secret:api-key],"},
		{"format verb", `fmt.Errorf("authorization: %w", err)`, `fmt.Errorf("authorization: %w", err)`},
		{"redacted header", "Authorization: Basic ***; encoded: ***", "Authorization: Basic ***; encoded: ***"},
		{"capitalised prose", "Secret: Update says why", "Secret: Update says why"},
		{"quoted sentence", `"password": "the one you chose when you signed up"`, `"password": "the one you chose when you signed up"`},
		{"percent-encoded signature", "&sig=Jk3%2BabcDEF0123ghiJKL456%3D", "&sig=[secret:high-entropy]"},
		{"camel case", "dbPassword: hunter22", "dbPassword: [secret:password]"},
		{"dotted name", "spring.datasource.password=hunter22", "spring.datasource.password=[secret:password]"},
		{"header token", "X-Auth-Token: abcdef123456", "X-Auth-Token: [secret:token]"},
		{"api key header", "X-Api-Key: abcdef123456", "X-Api-Key: [secret:api-key]"},
		{"qualified account key", "storage_account_key: abcdef123456", "storage_account_key: [secret:api-key]"},
		{"azure account key", "AccountKey=abcdef123456==;x=1", "AccountKey=[secret:azure-storage-key];x=1"},
		{"aws secret by its name", "aws_secret_access_key = " + awsSecret, "aws_secret_access_key = [secret:aws-secret-key]"},
		{"aws secret name, other value", "aws_secret_access_key = short123", "aws_secret_access_key = [secret:api-key]"},
		{"rails secret_key_base", "SECRET_KEY_BASE=abcdef123456", "SECRET_KEY_BASE=[secret:secret]"},
		{"provider rule names a merged mask", "GITHUB_TOKEN=" + ghToken, "GITHUB_TOKEN=[secret:github-token]"},
		{"short password", "password=abc", "password=abc"},
		{"4-byte password", "password=abcd", "password=[secret:password]"},
		{"short token", "token=abcde", "token=abcde"},
		{"trailing punctuation", "(password=hunter22).", "(password=[secret:password])."},

		// Entropy beside key-like names.
		{"random key", "key: q8Zr2Lx7Vn3Tb9Wm4Kc6", "key: [secret:high-entropy]"},
		{"key of words", "key: orders-cache-eu-west-1-profile", "key: orders-cache-eu-west-1-profile"},
		{"key of letters only", "key: abcdefghijklmnopqrstu", "key: abcdefghijklmnopqrstu"},
		{"uuid key", "cache_key: 2c5fca08-482d-4e6b-19c3-1151df3a2f87", "cache_key: 2c5fca08-482d-4e6b-19c3-1151df3a2f87"},
		{"public key name", "public_key: q8Zr2Lx7Vn3Tb9Wm4Kc6", "public_key: q8Zr2Lx7Vn3Tb9Wm4Kc6"},
		{"id after a key word", "private_key_id: q8Zr2Lx7Vn3Tb9Wm4Kc6", "private_key_id: q8Zr2Lx7Vn3Tb9Wm4Kc6"},

		// Repeats: a distinctive value masked elsewhere in the text too.
		{"echoed password", "PGPASSWORD=hunter22 psql; echo hunter22", "PGPASSWORD=[secret:password] psql; echo [secret:password]"},
		{"common word not repeated", "url: postgres://postgres:postgres1@db/postgres", "url: postgres://postgres:[secret:url-password]@db/postgres"},

		// Masks stay as they are.
		{"masked text", "token=[secret:github-token] and [secret:x-y]", "token=[secret:github-token] and [secret:x-y]"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := Default().Mask(tt.in)
			if got != tt.want {
				t.Errorf("Mask(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if (len(found) == 0) != (got == tt.in) {
				t.Errorf("findings %v for an output that %s", found, map[bool]string{true: "did not change", false: "changed"}[got == tt.in])
			}
			if again, f2 := Default().Mask(got); again != got || len(f2) != 0 {
				t.Errorf("masking again changed %q to %q (%v)", got, again, f2)
			}
		})
	}
}

func TestFindings(t *testing.T) {
	in := "a=1 GITHUB_TOKEN=" + ghToken + " pw=x url=https://u:hunter22@h/ id=" + awsID
	out, found := Default().Mask(in)
	want := []Finding{
		{"github-token", strings.Index(in, ghToken), strings.Index(in, ghToken) + len(ghToken)},
		{"url-password", strings.Index(in, "hunter22"), strings.Index(in, "hunter22") + 8},
		{"aws-access-key", strings.Index(in, awsID), len(in)},
	}
	if !slices.Equal(found, want) {
		t.Errorf("findings %v, want %v", found, want)
	}
	// The output is the input with each range replaced by its mask.
	var b strings.Builder
	last := 0
	for _, f := range found {
		b.WriteString(in[last:f.Start] + "[secret:" + f.Rule + "]")
		last = f.End
	}
	b.WriteString(in[last:])
	if b.String() != out {
		t.Errorf("output %q, findings make %q", out, b.String())
	}
}

// TestEnvDump is the example: an env dump with an AWS key, a
// GitHub token, a database URL with a password and a PEM key comes back
// with none of them, and everything else as it was.
func TestEnvDump(t *testing.T) {
	g := newGen(7)
	rsaPEM, _, _ := privateKeys(t)
	dump := envDump(g, rsaPEM)
	out, found := Default().Mask(dump)
	want := "$ env\nHOME=/home/dev\nPATH=/usr/local/bin:/usr/bin:/bin\nPWD=/home/dev/payments\n" +
		"AWS_ACCESS_KEY_ID=[secret:aws-access-key]\n" +
		"AWS_SECRET_ACCESS_KEY=[secret:aws-secret-key]\n" +
		"GITHUB_TOKEN=[secret:github-token]\n" +
		"DATABASE_URL=postgres://payments:[secret:url-password]@db.internal:5432/payments?sslmode=require\n" +
		"TLS_KEY=[secret:private-key]\nLANG=C.UTF-8\n"
	if out != want {
		t.Errorf("masked dump:\n%s\nwant:\n%s", out, want)
	}
	counts := Counts(nil, found)
	for _, id := range []string{"aws-access-key", "aws-secret-key", "github-token", "url-password", "private-key"} {
		if counts[id] != 1 {
			t.Errorf("counts %v: want 1 %s", counts, id)
		}
	}
	if len(counts) != 5 {
		t.Errorf("counts %v: want 5 rules", counts)
	}
}

func TestMaskValue(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"db_password", "hunter22", "[secret:password]"},
		{"GITHUB_TOKEN", ghToken, "[secret:token]"},
		{"api_key", "abc 123 def", "[secret:api-key]"},
		{"password", "${DB_PASSWORD}", "${DB_PASSWORD}"},
		{"password", "", ""},
		{"password", "[secret:password]", "[secret:password]"},
		{"signing_key", "q8Zr2Lx7Vn3Tb9Wm4Kc6", "[secret:api-key]"},
		{"key", "q8Zr2Lx7Vn3Tb9Wm4Kc6", "[secret:high-entropy]"},
		{"key", "orders", "orders"},
		// Other names: the value is scanned as text.
		{"note", "deploy with " + ghToken, "deploy with [secret:github-token]"},
		{"region", "eu-west-1", "eu-west-1"},
	}
	for _, tt := range tests {
		got, found := Default().MaskValue(tt.name, tt.value)
		if got != tt.want {
			t.Errorf("MaskValue(%q, %q) = %q, want %q", tt.name, tt.value, got, tt.want)
		}
		if (len(found) > 0) != (got != tt.value) {
			t.Errorf("MaskValue(%q, %q): findings %v", tt.name, tt.value, found)
		}
	}
}

func TestOff(t *testing.T) {
	var off *Scanner
	in := "GITHUB_TOKEN=" + ghToken
	if out, found := off.Mask(in); out != in || found != nil {
		t.Errorf("nil scanner masked: %q %v", out, found)
	}
	if out, found := off.MaskValue("password", "hunter22"); out != "hunter22" || found != nil {
		t.Errorf("nil scanner masked a value: %q %v", out, found)
	}
}

func TestCounts(t *testing.T) {
	if got := Counts(nil, nil); got != nil {
		t.Errorf("Counts(nil, nil) = %v, want nil", got)
	}
	got := Counts(map[string]int{"jwt": 1}, []Finding{{Rule: "jwt"}, {Rule: "password"}, {Rule: "jwt"}})
	if len(got) != 2 || got["jwt"] != 3 || got["password"] != 1 {
		t.Errorf("Counts = %v", got)
	}
}

// TestNoAllocationWithoutSecrets: a text without secrets is returned as
// it is, and scanning it allocates nothing.
func TestNoAllocationWithoutSecrets(t *testing.T) {
	text := sessionText(4096, 9)
	if out, found := Default().Mask(text); out != text || found != nil {
		t.Fatalf("clean session text changed: %v", found)
	}
	if n := testing.AllocsPerRun(20, func() { Default().Mask(text) }); n != 0 {
		t.Errorf("%v allocations scanning clean text, want 0", n)
	}
}

// TestGrowthBound: masks of the shortest values the rules take stay within
// MaxGrowth times the input.
func TestGrowthBound(t *testing.T) {
	for _, unit := range []string{"pwd=abcd ", "a:b:abcd@", "x://:a@", "AccountKey=abcdef;", "4111111111111 ", "4111111111111111,", "auth=q8Zr2Lx7Vn3Tb9Wm\n"} {
		in := strings.Repeat(unit, 200)
		out, found := Default().Mask(in)
		if len(found) == 0 {
			t.Logf("%q: nothing masked", unit)
		}
		if len(out) > MaxGrowth*len(in) {
			t.Errorf("%q: %d bytes grew to %d, over %d×", unit, len(in), len(out), MaxGrowth)
		}
	}
}

func TestRules(t *testing.T) {
	rules := Rules()
	if len(rules) != int(numRules) {
		t.Fatalf("%d rules, want %d", len(rules), numRules)
	}
	idRe := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for k, r := range rules {
		if !idRe.MatchString(r.ID) || seen[r.ID] || r.Matches == "" || r.Source == "" {
			t.Errorf("rule %+v: an id of lower-case words, unique, with what it matches and its source", r)
		}
		seen[r.ID] = true
		if m := maskEnd(maskPrefix+r.ID+"]", 0); m != len(maskPrefix)+len(r.ID)+1 {
			t.Errorf("the mask of %s is not recognised as one", r.ID)
		}
		if k > 0 && ruleTable[ruleIndex(rules[k-1].ID)].prio > ruleTable[ruleIndex(r.ID)].prio {
			t.Errorf("Rules not in precedence order at %s", r.ID)
		}
	}
}

// TestRulesDocumented: docs/api.md §11.10 lists every rule id.
func TestRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "### 11.10 Secrets in session text")
	if start < 0 {
		t.Fatal("docs/api.md has no §11.10 Secrets in session text")
	}
	section := text[start:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for _, r := range Rules() {
		if !strings.Contains(section, "`"+r.ID+"`") {
			t.Errorf("docs/api.md §11.10 does not list rule `%s`", r.ID)
		}
	}
}
