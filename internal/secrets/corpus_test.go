package secrets

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// corpusOut, when set, writes the generated corpus and the benchmark texts
// there (JSON lines and text files), to run other scanners on the same
// input (docs/benchmarks.md, "Secret scanner").
var corpusOut = flag.String("corpus-out", "", "directory to write the generated corpus and benchmark texts to")

// A fake is a text holding one generated secret in a real format.
type fake struct {
	Name   string `json:"name"`
	Rule   string `json:"rule"`   // the mask expected
	Secret string `json:"secret"` // the value no byte of which may stay
	Text   string `json:"text"`
}

// A lookalike is a text that looks like a secret but is none.
type lookalike struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Alphabets of generated values.
const (
	upper    = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower    = "abcdefghijklmnopqrstuvwxyz"
	digits   = "0123456789"
	alnum    = upper + lower + digits
	b64url   = alnum + "-_"
	b64std   = alnum + "+/"
	hexLower = "0123456789abcdef"
	base32   = upper + "234567"
)

// gen draws values from a seeded source, so the corpus is the same each
// run; only the private keys come from crypto/rand.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) gen { return gen{rand.New(rand.NewPCG(seed, 0x5ec2e75))} }

func (g gen) str(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

// token is n alphanumerics with at least one upper, lower and digit, as
// generated tokens have (a few rules require the mix).
func (g gen) token(n int) string {
	for {
		if s := g.str(alnum, n); mixedCase(s) {
			return s
		}
	}
}

func (g gen) uuid() string {
	h := g.str(hexLower, 32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// password is a generated password of letters, digits and symbols.
func (g gen) password() string {
	return g.token(10) + g.str("!#%*+-.=^_~", 2) + g.str(digits, 2)
}

// card is a number of the given prefix and length with a valid Luhn check
// digit (valid is false: an invalid one).
func (g gen) card(prefix string, n int, valid bool) string {
	d := []byte(prefix + g.str(digits, n-len(prefix)-1) + "0")
	for c := byte('0'); c <= '9'; c++ {
		d[n-1] = c
		if luhn(d) == valid {
			break
		}
	}
	return string(d)
}

func group(s string, sep string, sizes ...int) string {
	var parts []string
	for _, n := range sizes {
		parts = append(parts, s[:n])
		s = s[n:]
	}
	return strings.Join(parts, sep)
}

func (g gen) jwt() string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	payload := enc.EncodeToString(fmt.Appendf(nil, `{"sub":"%s","iat":%d,"scope":"orders:read"}`, g.uuid(), 1700000000+g.r.IntN(1e7)))
	mac := hmac.New(sha256.New, []byte(g.token(32)))
	mac.Write([]byte(header + "." + payload))
	return header + "." + payload + "." + enc.EncodeToString(mac.Sum(nil))
}

func pemBlock(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// privateKeys generates PEM blocks of fresh keys: RSA (PKCS #1), EC (SEC 1)
// and Ed25519 (PKCS #8).
func privateKeys(t testing.TB) (rsaPEM, ecPEM, pkcs8PEM string) {
	rk, err := rsa.GenerateKey(crand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ek)
	if err != nil {
		t.Fatal(err)
	}
	_, edk, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edDER, err := x509.MarshalPKCS8PrivateKey(edk)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk)), pemBlock("EC PRIVATE KEY", ecDER), pemBlock("PRIVATE KEY", edDER)
}

// openSSHKey is an OpenSSH private key block: the format's magic
// ("openssh-key-v1\0") and a random body, wrapped at 70 as ssh-keygen does.
func (g gen) openSSHKey() string {
	body := "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW" + g.str(b64std, 300)
	var b strings.Builder
	b.WriteString("-----BEGIN OPENSSH PRIVATE KEY-----\n")
	for len(body) > 70 {
		b.WriteString(body[:70] + "\n")
		body = body[70:]
	}
	b.WriteString(body + "\n-----END OPENSSH PRIVATE KEY-----\n")
	return b.String()
}

// fakes builds the corpus of secrets: each in a real format, generated,
// in the kind of text a session holds (env dumps, config files, JSON tool
// results, logs, shell commands).
func fakes(t testing.TB) []fake {
	g := newGen(18)
	rsaPEM, ecPEM, pkcs8PEM := privateKeys(t)
	var out []fake
	add := func(name, rule, secret, format string) {
		out = append(out, fake{Name: name, Rule: rule, Secret: secret, Text: strings.ReplaceAll(format, "%s", secret)})
	}
	add("aws access key id in env", "aws-access-key", "AKIA"+g.str(base32, 16), "export AWS_ACCESS_KEY_ID=%s\nexport AWS_DEFAULT_REGION=eu-west-1\n")
	add("aws temporary key id in sts JSON", "aws-access-key", "ASIA"+g.str(base32, 16), `{"Credentials": {"AccessKeyId": "%s", "Expiration": "2025-03-14T10:00:00Z"}}`)
	add("aws secret key in credentials file", "aws-secret-key", g.str(b64std, 40), "[default]\naws_access_key_id = AKIA"+g.str(base32, 16)+"\naws_secret_access_key = %s\n")
	add("aws secret key in sts JSON", "aws-secret-key", g.str(b64std, 40), `{"SecretAccessKey": "%s", "SessionToken": "`+g.str(b64std, 20)+`"}`)
	add("gcp api key in a URL", "gcp-api-key", "AIza"+g.str(b64url, 35), "GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key=%s 200 OK")
	add("azure storage connection string", "azure-storage-key", g.str(b64std, 86)+"==", "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=ordersprod;AccountKey=%s;EndpointSuffix=core.windows.net")
	add("azure service bus connection string", "azure-shared-access-key", g.str(b64std, 43)+"=", "Endpoint=sb://orders.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=%s")
	add("github classic token in prose", "github-token", "ghp_"+g.token(36), "I pushed with %s yesterday, then it stopped working.")
	add("github fine-grained token in env", "github-token", "github_pat_"+g.token(22)+"_"+g.token(59), "GH_TOKEN=%s gh pr list")
	add("github app token in a clone URL", "github-token", "ghs_"+g.token(36), "git clone https://x-access-token:%s@github.com/org/repo.git")
	add("gitlab token in a header", "gitlab-token", "glpat-"+g.str(b64url, 20), "curl --header \"PRIVATE-TOKEN: %s\" https://gitlab.example.com/api/v4/projects")
	add("slack bot token", "slack-token", "xoxb-"+g.str(digits, 12)+"-"+g.str(digits, 13)+"-"+g.token(24), "SLACK_BOT_TOKEN=%s\n")
	add("slack app token", "slack-token", "xapp-1-A"+g.str(upper+digits, 10)+"-"+g.str(digits, 13)+"-"+g.str(hexLower, 64), "socket mode with %s")
	add("slack webhook", "slack-webhook", "T"+g.str(upper+digits, 8)+"/B"+g.str(upper+digits, 10)+"/"+g.token(24), `webhook_url: "https://hooks.slack.com/services/%s"`)
	add("stripe live key", "stripe-key", "sk_live_"+g.token(24), `stripe.api_key = "%s"`)
	add("stripe restricted key", "stripe-key", "rk_live_"+g.token(24), "STRIPE_KEY=%s")
	add("stripe webhook secret", "stripe-key", "whsec_"+g.token(32), "endpoint secret is %s for /hooks/stripe")
	add("twilio api key", "twilio-api-key", "SK"+g.str(hexLower, 32), "TWILIO_API_KEY_SID=%s")
	add("sendgrid key", "sendgrid-key", "SG."+g.str(b64url, 22)+"."+g.str(b64url, 43), "sg = SendGridAPIClient('%s')")
	add("npm token in .npmrc", "npm-token", "npm_"+g.token(36), "//registry.npmjs.org/:_authToken=%s\n")
	add("pypi token in .pypirc", "pypi-token", "pypi-AgEIcHlwaS5vcmc"+g.str(b64url, 60), "[pypi]\nusername = __token__\npassword = %s\n")
	add("openai project key", "openai-key", "sk-proj-"+g.str(b64url, 74)+"T3BlbkFJ"+g.str(b64url, 74), "OPENAI_API_KEY=%s python agent.py")
	add("openai legacy key", "openai-key", "sk-"+g.token(20)+"T3BlbkFJ"+g.token(20), "the key sk was rotated: %s is revoked")
	add("anthropic key", "anthropic-key", "sk-ant-api03-"+g.str(b64url, 93)+"AA", "-H \"x-api-key: %s\" -H \"anthropic-version: 2023-06-01\"")
	add("hugging face token", "huggingface-token", "hf_"+g.str(upper+lower, 34), "HF_TOKEN=%s huggingface-cli download")
	add("google oauth client secret", "google-oauth-secret", "GOCSPX-"+g.str(b64url, 28), `{"web": {"client_id": "1234-abc.apps.googleusercontent.com", "client_secret": "%s"}}`)
	add("telegram bot token in a URL", "telegram-bot-token", g.str("123456789", 1)+g.str(digits, 9)+":AA"+g.str(b64url, 33), "POST https://api.telegram.org/bot%s/sendMessage")
	add("discord bot token", "discord-bot-token", "MT"+g.token(24)+"."+g.str(b64url, 6)+"."+g.str(b64url, 38), "DISCORD_BOT=%s")
	add("jwt in an Authorization header", "jwt", g.jwt(), "Authorization: Bearer %s\r\nHost: api.example.com\r\n")
	add("jwt in JSON", "jwt", g.jwt(), `{"id_token": "%s", "expires_in": 3600}`)
	add("rsa private key", "private-key", rsaPEM, "$ cat deploy/key.pem\n%s$ ls\n")
	add("ec private key", "private-key", ecPEM, "tool output:\n%s")
	add("pkcs8 key in service account JSON", "private-key", strings.ReplaceAll(pkcs8PEM, "\n", `\n`), `{"type": "service_account", "private_key_id": "`+g.str(hexLower, 40)+`", "private_key": "%s", "client_email": "svc@proj.iam.gserviceaccount.com"}`)
	add("openssh private key", "private-key", g.openSSHKey(), "~/.ssh/id_ed25519:\n%s")
	truncated := strings.Join(strings.Split(rsaPEM, "\n")[:4], "\n")
	add("private key cut short", "private-key", truncated, "head -4 key.pem\n%s\n[output truncated]")
	add("basic auth header", "authorization", base64.StdEncoding.EncodeToString([]byte("deploy:"+g.password())), "> Authorization: Basic %s\n> Accept: */*")
	add("proxy authorization header", "authorization", g.token(40), "Proxy-Authorization: Bearer %s")
	add("bearer token in a log line", "authorization", g.str(b64url, 40), `level=debug msg="upstream call" header="Bearer %s" status=200`)
	add("password in a database URL", "url-password", g.password(), "DATABASE_URL=postgres://orders:%s@db.internal:5432/orders?sslmode=require")
	add("password in a redis URL", "url-password", g.token(20), "connecting to redis://:%s@cache.internal:6379/0")
	add("password in an amqp URL", "url-password", g.password(), "broker: amqps://svc:%s@mq.example.com/vhost")
	add("password in env", "password", g.password(), "DB_USER=orders\nDB_PASSWORD=%s\nDB_HOST=db.internal\n")
	add("password in YAML", "password", g.password(), "database:\n  user: orders\n  password: %s\n  host: db\n")
	add("password in escaped JSON", "password", g.password(), `{"body": "{\"username\":\"svc\",\"password\":\"%s\"}"}`)
	add("password on a command line", "password", g.password(), "mysql -u root --password %s -h db.internal")
	add("password in XML", "password", g.password(), "<server><id>nexus</id><username>ci</username><password>%s</password></server>")
	add("client secret in a form body", "secret", g.token(32), "grant_type=client_credentials&client_id=orders&client_secret=%s&scope=read")
	add("auth token header", "token", g.str(hexLower, 32), "X-Auth-Token: %s")
	add("api key in YAML", "api-key", g.token(32), "datadog:\n  api_key: %s\n")
	add("random key beside a key name", "high-entropy", g.str(b64std, 44), "encryption:\n  key: %s\n")
	add("visa card spaced", "card-number", group(g.card("4", 16, true), " ", 4, 4, 4, 4), "card on file: %s exp 12/27")
	add("amex card dashed", "card-number", group(g.card("37", 15, true), "-", 4, 6, 5), "charge %s for 12.00 USD")
	add("mastercard in JSON", "card-number", g.card("5"+g.str("12345", 1), 16, true), `{"pan": "%s", "cvc_check": "pass"}`)
	return out
}

// lookalikes builds the corpus of texts that must stay as they are.
func lookalikes(t testing.TB) []lookalike {
	g := newGen(22)
	pngHead := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), g.str(alnum, 300)...))
	certDER := g.str(b64std, 64) + "\n" + g.str(b64std, 64) + "\n" + g.str(b64std, 20) + "=="
	return []lookalike{
		{"git log", "commit " + g.str(hexLower, 40) + "\nAuthor: Jane Doe <jane@example.com>\n\n    fix: retry on 503\n"},
		{"short shas", g.str(hexLower, 7) + " (HEAD -> main) fix: retry\n" + g.str(hexLower, 7) + " feat: add cache\n"},
		{"uuid id", `{"id": "` + g.uuid() + `", "status": "ok"}`},
		{"kubernetes metadata", "metadata:\n  uid: " + g.uuid() + "\n  resourceVersion: \"48213\"\n  generation: 3\n"},
		{"image digest", "image: registry.example.com/payments/checkout@sha256:" + g.str(hexLower, 64)},
		{"checksum field", "checksum: sha256:" + g.str(hexLower, 64)},
		{"sha256sum output", g.str(hexLower, 64) + "  contextrouter_linux_amd64.tar.gz"},
		{"sha512 integrity", `"integrity": "sha512-` + g.str(b64std, 86) + `=="`},
		{"png data URI", `<img alt="chart" src="data:image/png;base64,` + pngHead + `">`},
		{"etag header", `ETag: "` + g.str(hexLower, 32) + `"`},
		{"digest field", `{"digest": "` + g.str(hexLower, 64) + `", "size": 7023}`},
		{"hash field", "hash=" + g.str(hexLower, 40) + " tree=" + g.str(hexLower, 40)},
		{"version strings", "contextrouter v2.14.1 built with go1.26.8; chart 1.2.3-rc.1+build.5"},
		{"go pseudo-version", "require example.com/mod v0.0.0-20260908200009-" + g.str(hexLower, 12)},
		{"URLs with a user and no password", "https://git@github.com/org/repo.git and ssh://git@github.com:22/org/repo and postgres://orders@db:5432/orders"},
		{"URL query", "https://example.com/search?q=token&page=2&sort=desc"},
		{"hex colours", "color: #ff8800; background: #1e1e1e; border-color: #A0B1C2"},
		{"empty passwords", "PASSWORD=\npassword: \n\"password\": \"\"\n"},
		{"starred password", "password: ********\nDB_PASSWORD=***"},
		{"redacted values", `password: <redacted>` + "\n" + `{"password": "[REDACTED]", "token": "***REDACTED***"}`},
		{"variable references", "token: ${GITHUB_TOKEN}\napi_key: $API_KEY\nsecret: {{ .Values.secret }}\npassword=%DB_PASSWORD%"},
		{"docs prose", "Set token= to your token, and password: must be at least 12 characters. The secret: is kept in a vault."},
		{"code reading a secret", "api_key = os.environ[\"API_KEY\"]\npassword = getpass.getpass()\ntoken := cfg.Token\nsecret: process.env.SECRET"},
		{"token counts", "max_tokens: 1024, token_count=532, total_tokens: 1556"},
		{"author field", "author: Jane Doe <jane@example.com>\nauthority: https://login.example.com"},
		{"label key", "- key: app.kubernetes.io/name\n  operator: In"},
		{"idempotency key", "idempotency_key: " + g.uuid()},
		{"authorization prose", "The Authorization header is required; send it as Authorization: Bearer <token>."},
		{"aws arn and account", "arn:aws:iam::123456789012:role/deploy in account 123456789012, request " + g.uuid()},
		{"invalid card number", "order " + g.card("4", 16, false) + " shipped"},
		{"timestamps and phone numbers", "ts=1710410000123 dur=1.4111111111111111 phone +1 415 555 0100"},
		{"shell working directory", "PWD=/home/dev/project\nOLDPWD=/home/dev"},
		{"certificate and public key", "-----BEGIN CERTIFICATE-----\n" + certDER + "\n-----END CERTIFICATE-----\n-----BEGIN PUBLIC KEY-----\n" + certDER + "\n-----END PUBLIC KEY-----\n"},
		{"ssh public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + g.str(b64std, 43) + " dev@laptop"},
		{"password hash", "password_hash: $2b$12$" + g.str(b64std, 53)},
		{"secret references", "secretName: db-credentials\nsecretKeyRef:\n  name: db\n  key: password"},
		{"sk-like words", "pip install scikit-learn; sk-learn task-1234 sk-8 desk-lamp"},
		{"addresses", "ip 2001:db8::8a2e:370:7334 mac 00:1a:2b:3c:4d:5e"},
		{"trace ids", "request_id=" + g.uuid() + " trace_id=" + g.str(hexLower, 32) + " span_id=" + g.str(hexLower, 16)},
		{"base64 JSON config", "config: eyJhcGlWZXJzaW9uIjoidjEiLCJraW5kIjoiQ29uZmlnIn0="},
		{"prefix names in prose", "AWS keys start with AKIA or ASIA; GitHub's with ghp_ or github_pat_; Slack's with xoxb-."},
		{"container status", "imageID: docker-pullable://nginx@sha256:" + g.str(hexLower, 64)},
		{"git scp URL", "git@github.com:org/repo.git"},
	}
}

// maskRe is a mask in the output.
var maskRe = regexp.MustCompile(`\[secret:[a-z0-9-]+\]`)

// leak returns a run of 8 bytes of secret (all of it when shorter) left in
// out outside the masks, or "".
func leak(out, secret string) string {
	rest := maskRe.ReplaceAllString(out, "\x00")
	if len(secret) < 8 {
		if strings.Contains(rest, secret) {
			return secret
		}
		return ""
	}
	for k := 0; k+8 <= len(secret); k++ {
		if w := secret[k : k+8]; strings.Contains(rest, w) {
			return w
		}
	}
	return ""
}

func TestCorpusFakesMasked(t *testing.T) {
	fs := fakes(t)
	if len(fs) < 30 {
		t.Fatalf("corpus has %d fake secrets, want at least 30", len(fs))
	}
	kinds := map[string]bool{}
	for _, f := range fs {
		t.Run(f.Name, func(t *testing.T) {
			kinds[f.Rule] = true
			out, found := Default().Mask(f.Text)
			if w := leak(out, f.Secret); w != "" {
				t.Errorf("%q of the secret is left:\n%s", w, out)
			}
			at := strings.Index(f.Text, f.Secret)
			var rule string
			for _, x := range found {
				if x.Start <= at && at < x.End {
					rule = x.Rule
				}
			}
			if rule != f.Rule {
				t.Errorf("secret masked by rule %q, want %q:\n%s", rule, f.Rule, out)
			}
			if !strings.Contains(out, "[secret:"+f.Rule+"]") {
				t.Errorf("no [secret:%s] in:\n%s", f.Rule, out)
			}
		})
	}
	// Every rule has a fake in the corpus.
	for _, r := range Rules() {
		if !kinds[r.ID] {
			t.Errorf("rule %s has no fake secret in the corpus", r.ID)
		}
	}
}

// maxLookalikesMasked is what the issue allows (docs/api.md §11.10).
const maxLookalikesMasked = 2

func TestCorpusLookalikesKept(t *testing.T) {
	ls := lookalikes(t)
	if len(ls) < 30 {
		t.Fatalf("corpus has %d look-alikes, want at least 30", len(ls))
	}
	var masked []string
	for _, l := range ls {
		out, found := Default().Mask(l.Text)
		if len(found) > 0 {
			masked = append(masked, fmt.Sprintf("%s: %v\n%s", l.Name, found, out))
		}
	}
	for _, m := range masked {
		t.Logf("look-alike masked: %s", m)
	}
	if len(masked) > maxLookalikesMasked {
		t.Errorf("%d of %d look-alikes masked, want at most %d", len(masked), len(ls), maxLookalikesMasked)
	}
}

// TestWriteCorpus writes the corpus and the benchmark texts to
// -corpus-out (a run of another scanner on them is in docs/benchmarks.md).
func TestWriteCorpus(t *testing.T) {
	if *corpusOut == "" {
		t.Skip("no -corpus-out")
	}
	write := func(name string, lines []any) {
		var b strings.Builder
		for _, l := range lines {
			j, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(*corpusOut, name), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var fl, ll []any
	for _, f := range fakes(t) {
		fl = append(fl, f)
	}
	for _, l := range lookalikes(t) {
		ll = append(ll, l)
	}
	write("fakes.jsonl", fl)
	write("lookalikes.jsonl", ll)
	for name, text := range benchTexts() {
		if err := os.WriteFile(filepath.Join(*corpusOut, name+".txt"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
