package secrets

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// sessionText is about n bytes of what a session holds, without secrets:
// user and assistant turns, tool calls, and tool results (JSON records,
// structured logs, git output, image pulls), rich in "key=value",
// "key: value", URLs, UUIDs and hex digests.
func sessionText(n int, seed uint64) string {
	g := newGen(seed)
	turns := []string{
		"user: The checkout service returns 502s since this morning; can you look at the deployment and the last logs?\n",
		"assistant: I'll list the pods in the payments namespace first, then read the logs of the failing one.\n",
		"tool_call kubectl.get_pods {\"namespace\": \"payments\", \"selector\": \"app=checkout\"}\n",
		"assistant: The rollout at 09:12 changed the image to v2.14.1; the readiness probe fails on /healthz with a timeout of 1s.\n",
		"user: ok, compare it with the previous release notes and tell me what changed in the config.\n",
		"note: retries=3, timeout: 30s, region: eu-west-1, replicas: 4, strategy=RollingUpdate\n",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		if i%4 == 0 {
			b.WriteString(turns[(i/4)%len(turns)])
			continue
		}
		r := g.r
		ts := fmt.Sprintf("2025-03-14T09:%02d:%02d.%03dZ", i%60, r.IntN(60), r.IntN(1000))
		switch r.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "%s INFO  http request method=GET path=/api/v1/orders/%d status=200 duration=%dms request_id=%s\n", ts, r.IntN(99999), r.IntN(900), g.uuid())
		case 1:
			fmt.Fprintf(&b, "%s DEBUG cache hit key=orders:%d ttl=%ds node=cache-%d.internal:6379\n", ts, r.IntN(99999), r.IntN(3600), r.IntN(8))
		case 2:
			fmt.Fprintf(&b, "commit %s\nAuthor: Dev Example <dev@example.com>\n    fix: retry on 503 from upstream (#%d)\n", g.str(hexLower, 40), r.IntN(5000))
		case 3:
			fmt.Fprintf(&b, "{\"id\": \"%s\", \"status\": \"ok\", \"amount\": %d.%02d, \"currency\": \"EUR\", \"updated\": \"%s\"}\n", g.uuid(), r.IntN(500), r.IntN(100), ts)
		case 4:
			fmt.Fprintf(&b, "%s WARN  slow query took %dms: SELECT id, total FROM orders WHERE customer_id = $1 LIMIT 50\n", ts, 500+r.IntN(2000))
		default:
			fmt.Fprintf(&b, "pulled image registry.example.com/payments/checkout@sha256:%s (%d MiB) from https://registry.example.com/v2/\n", g.str(hexLower, 64), 20+r.IntN(300))
		}
	}
	return b.String()[:n]
}

// envDump is the example: an env dump with an AWS key, a GitHub
// token, a database URL with a password and a PEM key (generated).
func envDump(g gen, pemKey string) string {
	return "$ env\nHOME=/home/dev\nPATH=/usr/local/bin:/usr/bin:/bin\nPWD=/home/dev/payments\n" +
		"AWS_ACCESS_KEY_ID=AKIA" + g.str(base32, 16) + "\n" +
		"AWS_SECRET_ACCESS_KEY=" + g.str(b64std, 40) + "\n" +
		"GITHUB_TOKEN=ghp_" + g.token(36) + "\n" +
		"DATABASE_URL=postgres://payments:" + g.password() + "@db.internal:5432/payments?sslmode=require\n" +
		"TLS_KEY=" + pemKey + "LANG=C.UTF-8\n"
}

// benchPEM is a fixed-shape EC key block for the benchmarks (the corpus
// test generates real keys).
func benchPEM(g gen) string {
	return "-----BEGIN EC PRIVATE KEY-----\n" + g.str(b64std, 64) + "\n" + g.str(b64std, 64) + "\n" + g.str(b64std, 56) + "\n-----END EC PRIVATE KEY-----\n"
}

// benchTexts are the benchmark inputs: 4 KiB of session text without
// secrets, the same size with the env dump in it, and a 256 KiB log.
func benchTexts() map[string]string {
	g := newGen(4)
	dump := envDump(g, benchPEM(g))
	return map[string]string{
		"clean4k":   sessionText(4096, 1),
		"secrets4k": dump + sessionText(4096-len(dump), 2),
		"log256k":   sessionText(256<<10, 3),
	}
}

// benchMask measures Mask(text). cpu-ns/op is the thread's CPU time per
// scan: on a shared machine ns/op also counts the wait for a core.
func benchMask(b *testing.B, text string) {
	sc := Default()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := threadCPU()
	n := 0
	for b.Loop() {
		_, _ = sc.Mask(text)
		n++
	}
	if c1, _ := threadCPU(); ok {
		b.ReportMetric(float64(c1-c0)/float64(n), "cpu-ns/op")
	}
}

// BenchmarkMask is the scan of one item's text at write time.
func BenchmarkMask(b *testing.B) {
	texts := benchTexts()
	for _, name := range []string{"clean4k", "secrets4k", "log256k"} {
		text := texts[name]
		b.Run(name, func(b *testing.B) { benchMask(b, text) })
	}
}

// hostileTexts are 256 KiB texts built to make a scanner do the most work
// per byte: names whose values run on, blocks that never end, a finding
// every few bytes.
func hostileTexts() map[string]string {
	g := newGen(5)
	fill := func(unit func() string) string {
		var b strings.Builder
		for b.Len() < 256<<10 {
			b.WriteString(unit())
		}
		return b.String()[:256<<10]
	}
	return map[string]string{
		"run-on-values":     fill(func() string { return "password=${" }),
		"pem-without-end":   fill(func() string { return "-----BEGIN PRIVATE KEY-----\n" }),
		"open-headers":      fill(func() string { return "'Authorization: Bearer ***" }),
		"open-quotes":       fill(func() string { return `"password": "x` }),
		"a-finding-a-line":  fill(func() string { return "key=" + g.token(20) + "\n" }),
		"passwords-echoed":  fill(func() string { return "db_pwd=" + g.password() + " echo " }),
		"card-like-digits":  fill(func() string { return "4111 1111 " }),
		"urls-without-user": fill(func() string { return "https://u:" }),
	}
}

// BenchmarkMaskHostile is the worst case met so far: the cost of a write
// of 256 KiB crafted to be slow.
func BenchmarkMaskHostile(b *testing.B) {
	texts := hostileTexts()
	names := make([]string, 0, len(texts))
	for name := range texts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		text := texts[name]
		b.Run(name, func(b *testing.B) { benchMask(b, text) })
	}
}
