package secrets

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// FuzzMask: Mask never panics; its findings are sorted, disjoint ranges of
// the input, and the output is the input with each replaced by its mask;
// masking again changes nothing; every other whole-word occurrence of a
// distinctive masked value is masked too; the output stays within
// MaxGrowth.
func FuzzMask(f *testing.F) {
	for _, s := range []string{
		"export AWS_ACCESS_KEY_ID=AKIAQX4Z7Y2W3V5U6T7R\nGITHUB_TOKEN=" + ghToken,
		"DATABASE_URL=postgres://app:S3cr3t#1@db:5432/x",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx0123456789abcdef\n-----END RSA PRIVATE KEY-----",
		"-----BEGIN PRIVATE KEY-----\\nMIIEowIBAAKCAQEAx0123456789abcdef\\n",
		`{"password": "hunter22", "Authorization": "Bearer ` + jwtToken + `"}`,
		"card 4111 1111 1111 1111 2027, 3782-822463-10005",
		"key: q8Zr2Lx7Vn3Tb9Wm4Kc6 token=[secret:jwt] password: must be 8",
		"AccountKey=abc==;EndpointSuffix=x; x://:p@ --password hunter22 <password>x</password>",
		"https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefABCDEF012345678901",
		// Inputs TestMaskProperties found a second pass to change: a mask
		// joined a URL's user information, a PEM label, a header value.
		"==\n\\\"378282246310005eyJ\\npasswordpostgres://&378282246310005@--password",
		"378282246310005bot123456789:-----BEGIN github_pat_@xoxb-bearerAKIA-----END PRIVATE KEY-----",
		"bot123456789:=-----BEGIN PRIVATE KEY-----`<password>bearer-----BEGIN PRIVATE KEY-----4111111111111111:=bot123456789:",
		"sk-ant-\"\"postgres://u:,,-----BEGIN PRIVATE KEY-----@",
		"Authorization=AccountKey: =abcdefghijklmnopmust be4111111111111111Authorization.[secret:jwt]",
		"postgres://-----BEGIN PRIVATE KEY-----::=u:bot123456789:@u:0",
		// Masks that change a URL's authority and a name's neighbour: a
		// second scan of the output finds more (Mask scans until it does not).
		"postgres://u:secret,sk-proj-@.SECRET_KEY_BASEhf_[secret:BearerpwdSECRET_KEY_BASE@SG.npm_",
		"4111data:image/png;base64,-1111[secret:services/&-----https://hooks.slack.com/services/token:Proc-Type: 4,ENCRYPTEDAKIA:=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if msg := checkMask(in); msg != "" {
			t.Fatal(msg)
		}
	})
}

// TestMaskProperties checks FuzzMask's properties on texts put together
// from the pieces secrets and their look-alikes are made of: names,
// separators, quotes, escapes, provider prefixes, URLs, masks, digits. The
// coverage-guided fuzzer seldom builds such texts from bytes.
func TestMaskProperties(t *testing.T) {
	pieces := []string{
		"password", "PASSWORD", "pwd", "token", "api_key", "AccountKey", "secret", "key", "auth",
		"Authorization", "Bearer", "bearer", "--password", "<password>", "</password>",
		"=", ":", ": ", " = ", ":=", "=>", "==", "://", "@", ";", ",", "&", "\"", "'", "`", "\\\"", "\\n", "\n", " ", "\t",
		"ghp_", "github_pat_", "AKIA", "AIza", "glpat-", "xoxb-", "sk-ant-", "sk-proj-", "SG.", "eyJ", "hf_", "npm_",
		"-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "-----BEGIN ", "PRIVATE KEY", "-----",
		"postgres://", "u:", "https://hooks.slack.com/services/", "bot123456789:",
		"[secret:", "]", "[secret:password]", "[secret:jwt]",
		"4111", "1111", "4111111111111111", " 1111", "-1111", "378282246310005",
		"abcdefghijklmnop", "Zk3Qw8Vn2Lr5Tx7Pb9Mc4Hd6Jf1Gs0Ya8Ue3I", "q8Zr2Lx7Vn3Tb9Wm4Kc6", "hunter22", "S3cr3t#1",
		"${X}", "<redacted>", "***", "null", "must be", "a", "0", ".", "/", "(", ")",
		"\n", "\r\n", "Proc-Type: 4,ENCRYPTED", "-----END RSA PRIVATE KEY-----", "Digest ", "Basic ", "x-access-token:",
		"redis://:", "#", "%", "{{", "export ", "X-Api-Key", "client_secret", "DB_PASSWORD", "PGPASSWORD", "SECRET_KEY_BASE",
		"MT", "Zk3Qw8Vn2Lr5Tx7Pb9Mc4Hd", ".abcdef.", "whsec_", "sk_live_", "GOCSPX-", "pypi-AgE", "SK0123456789abcdef0123456789abcdef",
		"2c5fca08-482d-4e6b-19c3-1151df3a2f87", "sha256:", "data:image/png;base64,", "hooks", ".slack.com/", "services/",
	}
	g := newGen(99)
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for k := g.r.IntN(16) + 1; k > 0; k-- {
			b.WriteString(pieces[g.r.IntN(len(pieces))])
		}
		if msg := checkMask(b.String()); msg != "" {
			t.Fatal(msg)
		}
	}
}

// checkMask returns what is wrong with Mask(in), or "".
func checkMask(in string) string {
	out, found := Default().Mask(in)
	if len(found) == 0 && out != in {
		return fmt.Sprintf("no findings but %q became %q", in, out)
	}
	var b strings.Builder
	last := 0
	for _, x := range found {
		if x.Start < last || x.End <= x.Start || x.End > len(in) {
			return fmt.Sprintf("finding %+v of %q out of order or range (after %d)", x, in, last)
		}
		b.WriteString(in[last:x.Start] + maskPrefix + x.Rule + "]")
		last = x.End
	}
	b.WriteString(in[last:])
	if b.String() != out {
		return fmt.Sprintf("output %q is not the input %q with its findings %v masked", out, in, found)
	}
	if again, f2 := Default().Mask(out); again != out || len(f2) > 0 {
		return fmt.Sprintf("not idempotent: %q became %q, then %q (%v)", in, out, again, f2)
	}
	for _, x := range found {
		v := in[x.Start:x.End]
		if !distinctive(v) {
			continue
		}
		for off := 0; ; {
			p := strings.Index(in[off:], v)
			if p < 0 {
				break
			}
			p += off
			if bounded(in, p, p+len(v)) && !slices.ContainsFunc(found, func(y Finding) bool { return y.Start < p+len(v) && p < y.End }) {
				return fmt.Sprintf("masked value %q (%s) of %q left at %d in %q", v, x.Rule, in, p, out)
			}
			off = p + 1
		}
	}
	if len(out) > MaxGrowth*len(in) {
		return fmt.Sprintf("%d bytes of %q grew to %d", len(in), in, len(out))
	}
	return ""
}
