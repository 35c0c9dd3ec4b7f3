package sources

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
)

// The SDK reads a tools/list result that is null, or that has no "tools",
// as a page without tools: a broken server would empty the catalog without
// a word. An empty page is small, so the transport keeps the last small
// message of each tools/list answer (listAnswer), and listTools reads it
// when the SDK returns an empty page (emptyListProblem).

// maxKeptAnswer bounds a kept message; a longer one is not an empty page.
const maxKeptAnswer = 64 << 10

// keptAnswer is the last small message of the answer to tools/list request id.
type keptAnswer struct {
	id  string // the request's id, as compact JSON
	msg []byte
}

// listRequestID returns the id (as compact JSON) of a POST that is a
// tools/list request, else "". The SDK sends one message per POST.
func listRequestID(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(io.LimitReader(body, MaxMCPResponseBytes)).Decode(&msg) != nil || msg.Method != "tools/list" || len(msg.ID) == 0 {
		return ""
	}
	return compactJSON(msg.ID)
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// listAnswer reads the answer to a tools/list request alongside the SDK (a
// JSON body, or the events of a stream) and keeps its last message of at
// most maxKeptAnswer bytes in *kept. It sees every byte before the SDK
// does, so the message is kept before ListTools returns. Longer messages
// cost a scan for line ends, no copy.
type listAnswer struct {
	rc   io.ReadCloser
	id   string
	sse  bool
	kept *atomic.Pointer[keptAnswer]
	buf  []byte // JSON: the body so far; a stream: the current line
	data []byte // a stream: the current event's data
	// long: buf (the body or the line) or data passed maxKeptAnswer.
	long, longData bool
}

func newListAnswer(resp *http.Response, id string, kept *atomic.Pointer[keptAnswer]) *listAnswer {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return &listAnswer{rc: resp.Body, id: id, sse: ct == "text/event-stream", kept: kept}
}

func (a *listAnswer) Read(p []byte) (int, error) {
	n, err := a.rc.Read(p)
	if !a.sse {
		a.add(p[:n])
		if err == io.EOF && !a.long {
			a.keep(a.buf)
		}
		return n, err
	}
	for b := p[:n]; len(b) > 0; {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			a.add(b)
			break
		}
		a.add(b[:i])
		b = b[i+1:]
		a.line(bytes.TrimSuffix(a.buf, []byte("\r")))
		a.buf, a.long = a.buf[:0], false
	}
	return n, err
}

// add appends b to buf, unless that passes maxKeptAnswer.
func (a *listAnswer) add(b []byte) {
	if a.long = a.long || len(a.buf)+len(b) > maxKeptAnswer; !a.long {
		a.buf = append(a.buf, b...)
	}
}

// line takes one line of a stream: a data line, or the blank line that
// ends an event.
func (a *listAnswer) line(l []byte) {
	switch {
	case len(l) == 0 && !a.long:
		if len(a.data) > 0 && !a.longData {
			a.keep(a.data)
		}
		a.data, a.longData = a.data[:0], false
	case a.long:
		a.longData = true // a data line too long to keep, or another field
	case bytes.HasPrefix(l, []byte("data:")):
		v := bytes.TrimPrefix(l[len("data:"):], []byte(" "))
		if len(a.data) > 0 {
			a.data = append(a.data, '\n')
		}
		a.longData = a.longData || len(a.data)+len(v) > maxKeptAnswer
		if !a.longData {
			a.data = append(a.data, v...)
		}
	}
}

func (a *listAnswer) keep(msg []byte) {
	a.kept.Store(&keptAnswer{id: a.id, msg: bytes.Clone(msg)})
}

func (a *listAnswer) Close() error { return a.rc.Close() }

// emptyListProblem says why a kept answer that the SDK read as an empty
// page is not one: a null result, or no "tools". "" when it is one, or
// when the answer was not kept.
func emptyListProblem(k *keptAnswer) string {
	if k == nil {
		return ""
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			Tools *[]json.RawMessage `json:"tools"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(k.msg, &m) != nil || compactJSON(m.ID) != k.id || m.Error != nil {
		return "" // not the response; the SDK reports errors itself
	}
	switch {
	case m.Result == nil:
		return "the result is null"
	case m.Result.Tools == nil:
		return `the result has no "tools"`
	}
	return ""
}
