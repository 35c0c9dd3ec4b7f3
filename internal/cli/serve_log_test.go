package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// jsonKeys checks one JSON value for objects that repeat a key and collects
// the top-level values by key.
func jsonKeys(dec *json.Decoder, top map[string]json.RawMessage, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		for dec.More() {
			if err := jsonKeys(dec, nil, depth+1); err != nil {
				return err
			}
		}
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q appears twice", key)
			}
			seen[key] = true
			if depth == 0 && top != nil {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return err
				}
				top[key] = raw
				if err := jsonKeys(json.NewDecoder(bytes.NewReader(raw)), nil, depth+1); err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
				continue
			}
			if err := jsonKeys(dec, nil, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// TestServeJSONLogKeys runs serve with JSON logs on a source that skips a file
// (logged with the source's name) and checks every line: each key once, and
// durations as Go duration strings, not integer nanoseconds.
func TestServeJSONLogKeys(t *testing.T) {
	dir := skippingSource(t) // its wiki skips big.md, logged with the source's name
	s := startServe(t, "-f", dir, "--log-format", "json", "--log-level", "info", "--shutdown-delay", "10ms")
	if code, body := s.post(t, `{"text": "honey"}`); code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	durations := map[string]bool{} // the duration keys seen, by message
	sawSkip := false
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		top := map[string]json.RawMessage{}
		if err := jsonKeys(json.NewDecoder(strings.NewReader(line)), top, 0); err != nil {
			t.Errorf("%v in log line %s", err, line)
			continue
		}
		var msg string
		_ = json.Unmarshal(top["msg"], &msg)
		if strings.HasPrefix(msg, "skipping big.md") {
			sawSkip = true
			if string(top["source"]) != `"wiki"` {
				t.Errorf("skip line without source wiki: %s", line)
			}
		}
		for _, k := range []string{"took", "delay", "timeout"} {
			raw, ok := top[k]
			if !ok {
				continue
			}
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Errorf("%s=%s is not a duration string in %s", k, raw, line)
				continue
			}
			if _, err := time.ParseDuration(v); err != nil {
				t.Errorf("%s=%q: %v", k, v, err)
			}
			durations[msg+"/"+k] = true
		}
	}
	if !sawSkip {
		t.Errorf("no skip line for big.md in the log")
	}
	for _, want := range []string{"snapshot serving/took", "shutting down/delay", "shutting down/timeout"} {
		if !durations[want] {
			t.Errorf("no %s in the log (saw %v)", want, durations)
		}
	}
}
