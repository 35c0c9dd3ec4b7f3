package engine

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/contextrouter/contextrouter/internal/textutil"
)

// Input bounds of a query. The compile-time cost check of route conditions
// (celcost.go) prices every input at these sizes, and Query refuses a request
// past any of them, so the price of a condition is an upper bound of its work.
const (
	MaxTextBytes  = 64 << 10
	MaxAgentBytes = 253 // the longest Kubernetes object name; agents are ServiceAccount names in token mode
	MaxTags       = 64
	MaxTagBytes   = 256
	// MaxMetadataPairs bounds the number of metadata entries, MaxMetadataKeyBytes
	// and MaxMetadataValueBytes the size of each key and value.
	MaxMetadataPairs      = 64
	MaxMetadataKeyBytes   = 256
	MaxMetadataValueBytes = 1024
	// MaxToolsPerRequest bounds max_tools, the tool cards a query asks for.
	MaxToolsPerRequest = 100
)

// MaxVarsSize bounds the router's spec.variables as the cost check assumes
// them: every string at most this many bytes, every list and map at most this
// many entries (Compile refuses larger ones).
const MaxVarsSize = 1024

// MaxWordEntryBytes bounds one entry of the word list of containsAnyWord and
// containsAllWords; a longer entry is an evaluation error. It lets the cost
// check price lists whose entries it cannot size (tags.map(...), split(...)).
const MaxWordEntryBytes = 1024

// CheckAgent is the bound of an agent name, for a query and for every
// other request that names an agent (sessions, the tool tree, MCP tools);
// the error wraps ErrBadRequest.
func CheckAgent(agent string) error {
	if n := len(agent); n > MaxAgentBytes {
		return fmt.Errorf("%w: agent is %d bytes; it is limited to %d bytes", ErrBadRequest, n, MaxAgentBytes)
	}
	return nil
}

// validateRequest enforces the input bounds; the error wraps ErrBadRequest and
// names the field and its limit.
func validateRequest(req *Request) error {
	if strings.TrimSpace(req.Text) == "" {
		return fmt.Errorf("%w: text must not be empty", ErrBadRequest)
	}
	if n := len(req.Text); n > MaxTextBytes {
		return fmt.Errorf("%w: text is %d bytes; it is limited to %d bytes", ErrBadRequest, n, MaxTextBytes)
	}
	if err := CheckAgent(req.Agent); err != nil {
		return err
	}
	if n := len(req.Tags); n > MaxTags {
		return fmt.Errorf("%w: %d tags; at most %d are allowed", ErrBadRequest, n, MaxTags)
	}
	for i, t := range req.Tags {
		if len(t) > MaxTagBytes {
			return fmt.Errorf("%w: tags[%d] is %d bytes; tags are limited to %d bytes", ErrBadRequest, i, len(t), MaxTagBytes)
		}
	}
	if n := len(req.Metadata); n > MaxMetadataPairs {
		return fmt.Errorf("%w: %d metadata pairs; at most %d are allowed", ErrBadRequest, n, MaxMetadataPairs)
	}
	// Map order is random: report the smallest offending key, so the error is
	// deterministic without sorting every request's keys.
	var badKey string
	found := false
	for k, v := range req.Metadata {
		if (len(k) > MaxMetadataKeyBytes || len(v) > MaxMetadataValueBytes) && (!found || k < badKey) {
			badKey, found = k, true
		}
	}
	if found {
		if n := len(badKey); n > MaxMetadataKeyBytes {
			return fmt.Errorf("%w: metadata key %s is %d bytes; keys are limited to %d bytes", ErrBadRequest, quoteShort(badKey), n, MaxMetadataKeyBytes)
		}
		return fmt.Errorf("%w: metadata[%q] is %d bytes; values are limited to %d bytes", ErrBadRequest, badKey, len(req.Metadata[badKey]), MaxMetadataValueBytes)
	}
	if req.MaxTokens < 0 || req.MaxChunks < 0 {
		return fmt.Errorf("%w: max_tokens and max_chunks must not be negative", ErrBadRequest)
	}
	if req.MaxTools < 0 || req.MaxTools > MaxToolsPerRequest {
		return fmt.Errorf("%w: max_tools is %d; it must be between 0 and %d", ErrBadRequest, req.MaxTools, MaxToolsPerRequest)
	}
	if err := CheckToolFormat(req.Format); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

// quoteShort quotes s for an error message, cut to its first 32 bytes.
func quoteShort(s string) string {
	if cut := textutil.CutBytes(s, 32, ""); len(cut) < len(s) {
		return strconv.Quote(cut) + textutil.Ellipsis
	}
	return strconv.Quote(s)
}

// varsTooLarge checks a JSON value of spec.variables against MaxVarsSize and
// returns the path of the first value past it, with the problem.
func varsTooLarge(path string, v any) (string, string) {
	switch v := v.(type) {
	case string:
		if len(v) > MaxVarsSize {
			return path, fmt.Sprintf("string of %d bytes; variables are limited to %d bytes per string (the condition cost check assumes it)", len(v), MaxVarsSize)
		}
	case []any:
		if len(v) > MaxVarsSize {
			return path, fmt.Sprintf("list of %d entries; variables are limited to %d entries per list (the condition cost check assumes it)", len(v), MaxVarsSize)
		}
		for i, e := range v {
			if p, msg := varsTooLarge(fmt.Sprintf("%s[%d]", path, i), e); msg != "" {
				return p, msg
			}
		}
	case map[string]any:
		if len(v) > MaxVarsSize {
			return path, fmt.Sprintf("map of %d entries; variables are limited to %d entries per map (the condition cost check assumes it)", len(v), MaxVarsSize)
		}
		for _, k := range sortedKeys(v) {
			if len(k) > MaxVarsSize {
				return path, fmt.Sprintf("key of %d bytes; variables are limited to %d bytes per string (the condition cost check assumes it)", len(k), MaxVarsSize)
			}
			if p, msg := varsTooLarge(path+"."+k, v[k]); msg != "" {
				return p, msg
			}
		}
	}
	return "", ""
}
