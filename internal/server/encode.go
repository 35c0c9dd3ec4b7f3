package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/jsonenc"
)

// appendResponse appends r as JSON, byte for byte what encoding/json writes
// with SetEscapeHTML(false) (TestAppendResponseMatchesEncodingJSON holds it
// to that, field by field). It exists for speed: a quickstart answer is
// about 14 KB of chunk text, written twice (chunks and text), and
// encoding/json's per-byte escaping and reflection were a quarter of the
// server's time per query.
func appendResponse(b []byte, r *engine.Response) []byte {
	b = append(b, `{"chunks":`...)
	if r.Chunks == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Chunks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendChunk(b, &r.Chunks[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"text":`...)
	b = appendString(b, r.Text)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(r.TotalTokens), 10)
	b = append(b, `,"was_truncated":`...)
	b = strconv.AppendBool(b, r.WasTruncated)
	b = append(b, `,"matched_routes":`...)
	b = appendStrings(b, r.MatchedRoutes)
	b = append(b, `,"route_matches":`...)
	b = appendRouteMatches(b, r.RouteMatches)
	b = append(b, `,"denied_sources":`...)
	b = appendStrings(b, r.DeniedSources)
	b = append(b, `,"failed_sources":`...)
	if r.FailedSources == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, f := range r.FailedSources {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"source":`...)
			b = appendString(b, f.Source)
			b = append(b, `,"error":`...)
			b = appendString(b, f.Error)
			if f.Reason != "" {
				b = append(b, `,"reason":`...)
				b = appendString(b, f.Reason)
			}
			if f.Route != "" {
				b = append(b, `,"route":`...)
				b = appendString(b, f.Route)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"route_errors":`...)
	if r.RouteErrors == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, e := range r.RouteErrors {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"route":`...)
			b = appendString(b, e.Route)
			b = append(b, `,"error":`...)
			b = appendString(b, e.Error)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"warnings":`...)
	b = appendStrings(b, r.Warnings)
	b = append(b, `,"tools":`...)
	if r.Tools == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendToolCard(b, &r.Tools[i])
		}
		b = append(b, ']')
	}
	if r.Detection != nil {
		b = append(b, `,"detection":`...)
		b = appendDetection(b, r.Detection)
	}
	s := &r.Stats
	b = append(b, `,"stats":{"candidates":`...)
	b = strconv.AppendInt(b, int64(s.Candidates), 10)
	b = append(b, `,"included":`...)
	b = strconv.AppendInt(b, int64(s.Included), 10)
	b = append(b, `,"redacted":`...)
	b = strconv.AppendInt(b, int64(s.Redacted), 10)
	b = append(b, `,"pinned_dropped":`...)
	b = strconv.AppendInt(b, int64(s.PinnedDropped), 10)
	b = append(b, `,"no_term_match":`...)
	b = strconv.AppendInt(b, int64(s.NoTermMatch), 10)
	b = append(b, `,"no_match_fallback":`...)
	b = strconv.AppendInt(b, int64(s.NoMatchFallback), 10)
	b = append(b, `,"dropped":{"budget":`...)
	b = strconv.AppendInt(b, int64(s.Dropped.Budget), 10)
	b = append(b, `,"path_denied":`...)
	b = strconv.AppendInt(b, int64(s.Dropped.PathDenied), 10)
	b = append(b, `,"sensitivity":`...)
	b = strconv.AppendInt(b, int64(s.Dropped.Sensitivity), 10)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendInt(b, int64(s.Dropped.Duplicate), 10)
	b = append(b, `,"stale":`...)
	b = strconv.AppendInt(b, int64(s.Dropped.Stale), 10)
	b = append(b, `},"tools":{"candidates":`...)
	b = strconv.AppendInt(b, int64(s.Tools.Candidates), 10)
	b = append(b, `,"denied":`...)
	b = strconv.AppendInt(b, int64(s.Tools.Denied), 10)
	b = append(b, `,"below_threshold":`...)
	b = strconv.AppendInt(b, int64(s.Tools.BelowThreshold), 10)
	b = append(b, `,"below_cut":`...)
	b = strconv.AppendInt(b, int64(s.Tools.BelowCut), 10)
	b = append(b, `,"returned":`...)
	b = strconv.AppendInt(b, int64(s.Tools.Returned), 10)
	if s.Tools.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, s.Tools.Reason)
	}
	b = append(b, `},"routes":{"fallback":`...)
	b = strconv.AppendInt(b, int64(s.Routes.Fallback), 10)
	b = append(b, `,"alternate":`...)
	b = strconv.AppendInt(b, int64(s.Routes.Alternate), 10)
	b = append(b, `}},"evaluation_time_ms":`...)
	b = appendFloat(b, r.EvaluationTimeMS)
	return append(b, "}\n"...)
}

// appendDetection writes a detection as encoding/json does: classifiers by
// sorted name, nil lists as null.
func appendDetection(b []byte, d *engine.Detection) []byte {
	b = append(b, `{"classifiers":`...)
	if d.Classifiers == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, name := range slices.Sorted(maps.Keys(d.Classifiers)) {
			if i > 0 {
				b = append(b, ',')
			}
			c := d.Classifiers[name]
			b = appendString(b, name)
			b = append(b, `:{"label":`...)
			b = appendString(b, c.Label)
			b = append(b, `,"confidence":`...)
			b = appendFloat(b, c.Confidence)
			b = append(b, `,"alternatives":`...)
			if c.Alternatives == nil {
				b = append(b, "null"...)
			} else {
				b = append(b, '[')
				for j, a := range c.Alternatives {
					if j > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"label":`...)
					b = appendString(b, a.Label)
					b = append(b, `,"confidence":`...)
					b = appendFloat(b, a.Confidence)
					b = append(b, '}')
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, `,"entities":`...)
	if d.Entities == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i, e := range d.Entities {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = appendString(b, e.Type)
		b = append(b, `,"value":`...)
		b = appendString(b, e.Value)
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, int64(e.Start), 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, int64(e.End), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendRouteMatches(b []byte, ms []engine.RouteMatch) []byte {
	if ms == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"route":`...)
		b = appendString(b, m.Route)
		b = append(b, `,"matched_by":`...)
		b = appendString(b, m.MatchedBy)
		if m.AlternateFor != "" {
			b = append(b, `,"alternate_for":`...)
			b = appendString(b, m.AlternateFor)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendChunk(b []byte, c *engine.Chunk) []byte {
	b = append(b, `{"content":`...)
	b = appendString(b, c.Content)
	b = append(b, `,"source":`...)
	b = appendString(b, c.Source)
	b = append(b, `,"title":`...)
	b = appendString(b, c.Title)
	b = append(b, `,"path":`...)
	b = appendString(b, c.Path)
	b = append(b, `,"relevance_score":`...)
	b = appendFloat(b, c.RelevanceScore)
	b = append(b, `,"token_count":`...)
	b = strconv.AppendInt(b, int64(c.TokenCount), 10)
	b = append(b, `,"metadata":{"chunk":`...)
	b = strconv.AppendInt(b, int64(c.Metadata.Chunk), 10)
	if c.Metadata.Commit != "" {
		b = append(b, `,"commit":`...)
		b = appendString(b, c.Metadata.Commit)
	}
	if c.Metadata.MTime != "" {
		b = append(b, `,"mtime":`...)
		b = appendString(b, c.Metadata.MTime)
	}
	if c.Metadata.Redacted {
		b = append(b, `,"redacted":true`...)
	}
	if c.Metadata.AgeSeconds != nil {
		b = append(b, `,"age_seconds":`...)
		b = strconv.AppendInt(b, *c.Metadata.AgeSeconds, 10)
	}
	if c.Metadata.Stale != nil {
		b = append(b, `,"stale":`...)
		b = strconv.AppendBool(b, *c.Metadata.Stale)
	}
	return append(b, "}}"...)
}

func appendToolCard(b []byte, c *engine.ToolCard) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, c.Name)
	b = append(b, `,"namespace":`...)
	b = appendString(b, c.Namespace)
	b = append(b, `,"source":`...)
	b = appendString(b, c.Source)
	b = append(b, `,"description":`...)
	b = appendString(b, c.Description)
	b = append(b, `,"side_effects":`...)
	b = appendString(b, string(c.SideEffects))
	if len(c.SafetyTags) > 0 {
		b = append(b, `,"safety_tags":`...)
		b = appendStrings(b, c.SafetyTags)
	}
	if c.CostHint != "" {
		b = append(b, `,"cost_hint":`...)
		b = appendString(b, c.CostHint)
	}
	b = append(b, `,"score":`...)
	b = appendFloat(b, c.Score)
	b = append(b, `,"confidence":`...)
	b = appendFloat(b, c.Confidence)
	if len(c.Also) > 0 {
		b = append(b, `,"also":[`...)
		for i, r := range c.Also {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, r.ID)
			b = append(b, `,"source":`...)
			b = appendString(b, r.Source)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if c.Fallback {
		b = append(b, `,"fallback":true`...)
	}
	if c.Explain != nil {
		// Rare and nested: encoding/json writes it, without HTML escapes
		// like the rest.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c.Explain); err == nil {
			b = append(b, `,"explain":`...)
			b = append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	return append(b, '}')
}

// appendStrings writes a list of strings; nil is null.
func appendStrings(b []byte, ss []string) []byte { return jsonenc.AppendStrings(b, ss) }

// appendFloat formats like encoding/json (ES6 number formatting). Scores
// and timings are always finite.
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, '0')
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString quotes s like encoding/json without HTML escaping.
func appendString(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }
