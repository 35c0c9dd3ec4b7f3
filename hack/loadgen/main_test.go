package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// target answers 200 when it gets the expected request, and 503 to every
// tenth request when flaky is set.
func target(t *testing.T, flaky bool) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(b) != `{"text": "hi"}` || r.Header.Get("Authorization") != "Bearer t" ||
			r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		if flaky && i%10 == 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRunByCount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flaky  bool
		code   int
		failed int
	}{
		{"all answered", false, 0, 0},
		{"some refused", true, 1, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := target(t, tc.flaky)
			var out, errOut bytes.Buffer
			code := run([]string{"-url", srv.URL, "-n", "200", "-c", "4", "-warmup", "0", "-body", `{"text": "hi"}`, "-H", "Authorization: Bearer t", "-json"}, &out, &errOut)
			var rep Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("%v: %s %s", err, out.String(), errOut.String())
			}
			if code != tc.code || rep.Requests != 200 || rep.Failed != tc.failed || rep.Status["200"] != 200-tc.failed {
				t.Fatalf("exit %d, report %+v", code, rep)
			}
			if tc.failed > 0 && rep.Status["503"] != tc.failed {
				t.Fatalf("status counts %v", rep.Status)
			}
			l := rep.Latency
			if rep.QPS <= 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max || l.Mean > l.Max {
				t.Fatalf("implausible numbers: %+v", rep)
			}
		})
	}
}

func TestRunByDurationText(t *testing.T) {
	srv, n := target(t, false)
	var out, errOut bytes.Buffer
	code := run([]string{"-url", srv.URL, "-d", "200ms", "-c", "2", "-warmup", "50ms", "-body", `{"text": "hi"}`, "-H", "Authorization: Bearer t"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"throughput:", "q/s", "latency (ms): mean", "status:       200: ", "failed:       0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if n.Load() == 0 {
		t.Fatal("no request reached the server")
	}
}

func TestRunTransportErrors(t *testing.T) {
	srv, _ := target(t, false)
	url := srv.URL
	srv.Close()
	var out, errOut bytes.Buffer
	code := run([]string{"-url", url, "-n", "5", "-c", "1", "-warmup", "0", "-json"}, &out, &errOut)
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if code != 1 || rep.Failed != 5 || len(rep.Errors) == 0 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "0"}, "-c: 0 workers"},
		{[]string{"-d", "0s"}, "-d must be positive"},
		{[]string{"-H", "NoColon"}, `-H "NoColon": want "Name: value"`},
		{[]string{"-url", "/relative"}, "want an absolute http:// URL"},
		{[]string{"-body", "@/does/not/exist"}, "-body: open /does/not/exist"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}
