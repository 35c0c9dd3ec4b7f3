package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationApprovedTools holds the approved digests of a Tools or MCP
// source's tools, as ID=DIGEST entries (api.md §10.9). Under approval
// Manual, a tool whose current digest it does not hold is not served.
const AnnotationApprovedTools = "contextrouter.dev/approved-tools"

// Tool changes a digest names (api.md §10.9).
const (
	// ToolNew: the tool's id has no approved digest.
	ToolNew = "New"
	// ToolChanged: the tool's digest is not the approved one.
	ToolChanged = "Changed"
)

// ToolDigestParts are the parts of a tool a digest covers, in the order of
// the digest's fingerprints: what the agent reads (description, input
// schema), what it is told the tool does, and what steers selection.
var ToolDigestParts = []string{"description", "inputSchema", "annotations", "examples"}

const (
	// toolDigestHex is how many hex digits of the tool's SHA-256 a digest
	// keeps: 96 bits, so no one can change a tool and keep its digest.
	toolDigestHex = 24
	// partDigestHex is how many hex digits of each part's SHA-256 a digest
	// keeps: enough to name what changed (a changed part keeps its digits
	// with chance 1/65536), too few to decide anything on.
	partDigestHex = 4
	// ToolDigestLength is the length of a digest.
	ToolDigestLength = toolDigestHex + 1 + partDigestHex*4
)

var toolDigestPattern = regexp.MustCompile(`^[0-9a-f]{24}\.[0-9a-f]{16}$`)

// ToolDigest is the digest of a catalog entry (api.md §10.9): the first 24
// hex digits of the SHA-256 of the tool (its id and the SHA-256 of each
// part), a dot, and the first 4 hex digits of each part's SHA-256 in
// ToolDigestParts order. Each part is hashed as canonical JSON: object keys
// sorted, no white space, strings as encoding/json writes them without HTML
// escaping, numbers as written, absent lists as [], a key given twice
// counting once (its last value). The entry is defaulted first, so that an
// unset field and its default have one digest.
func ToolDigest(t *Tool) string {
	c := *t
	c.Default()
	n := 256 + len(c.Description)
	if c.InputSchema != nil {
		n += len(c.InputSchema.Raw)
	}
	buf := make([]byte, 0, n)
	var parts [4][sha256.Size]byte
	sum := func(i int, b []byte) []byte {
		parts[i] = sha256.Sum256(b)
		return b[:0]
	}
	buf = sum(0, appendJSONString(buf, c.Description))
	if c.InputSchema != nil && len(c.InputSchema.Raw) > 0 {
		buf = sum(1, appendCanonicalJSON(buf, c.InputSchema.Raw))
	} else {
		buf = sum(1, append(buf, `{"type":"object"}`...))
	}
	buf = append(buf, `{"costHint":`...)
	buf = appendJSONString(buf, c.CostHint)
	buf = append(buf, `,"latencyHint":`...)
	buf = appendJSONString(buf, c.LatencyHint)
	buf = append(buf, `,"safetyTags":`...)
	buf = appendJSONStrings(buf, c.SafetyTags)
	buf = append(buf, `,"sideEffects":`...)
	buf = appendJSONString(buf, string(c.SideEffects))
	buf = append(buf, `,"tags":`...)
	buf = appendJSONStrings(buf, c.Tags)
	buf = sum(2, append(buf, '}'))
	buf = append(buf, `{"antiPatterns":`...)
	buf = appendJSONStrings(buf, c.AntiPatterns)
	buf = append(buf, `,"examples":`...)
	buf = appendJSONStrings(buf, c.Examples)
	buf = sum(3, append(buf, '}'))

	var hexes [4][2 * sha256.Size]byte
	for i := range parts {
		hex.Encode(hexes[i][:], parts[i][:])
	}
	for i, key := range []string{`{"annotations":"`, `","description":"`, `","examples":"`} {
		buf = append(buf, key...)
		buf = append(buf, hexes[[]int{2, 0, 3}[i]][:]...)
	}
	buf = append(buf, `","id":`...)
	buf = appendJSONString(buf, c.ID())
	buf = append(buf, `,"inputSchema":"`...)
	buf = append(buf, hexes[1][:]...)
	buf = append(buf, `","v":1}`...)
	whole := sha256.Sum256(buf)

	out := make([]byte, 0, ToolDigestLength)
	out = hex.AppendEncode(out, whole[:toolDigestHex/2])
	out = append(out, '.')
	for i := range hexes {
		out = append(out, hexes[i][:partDigestHex]...)
	}
	return string(out)
}

// CatalogDigest is the digest of a catalog given its tools' digests by id:
// "sha256:" and the SHA-256 of the lines "id=digest\n" in id order.
func CatalogDigest(digests map[string]string) string {
	h := sha256.New()
	for _, id := range slices.Sorted(maps.Keys(digests)) {
		fmt.Fprintf(h, "%s=%s\n", id, digests[id])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ChangedParts names the parts (ToolDigestParts) whose fingerprints differ
// between an approved digest and the current one of the same tool: nil when
// the digests are equal, and empty (not nil) when the tool changed in a way
// the fingerprints cannot tell.
func ChangedParts(approved, current string) []string {
	if approved == current {
		return nil
	}
	out := []string{}
	if len(approved) != ToolDigestLength || len(current) != ToolDigestLength {
		return out
	}
	for i, part := range ToolDigestParts {
		at := toolDigestHex + 1 + i*partDigestHex
		if approved[at:at+partDigestHex] != current[at:at+partDigestHex] {
			out = append(out, part)
		}
	}
	return out
}

// ParseApprovedTools reads the value of AnnotationApprovedTools: entries
// ID=DIGEST separated by white space or commas, each id once.
func ParseApprovedTools(value string) (map[string]string, error) {
	errs := parseApprovedTools(value)
	if len(errs.list) > 0 {
		return nil, errs.list[0]
	}
	return errs.approved, nil
}

type approvedParse struct {
	approved map[string]string
	list     []error
}

// maxApprovalErrors bounds the problems one annotation reports.
const maxApprovalErrors = 5

func parseApprovedTools(value string) approvedParse {
	out := approvedParse{approved: map[string]string{}}
	fields := strings.FieldsFunc(value, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if len(fields) > MaxCatalogTools {
		out.list = append(out.list, fmt.Errorf("%d entries; a source has at most %d tools", len(fields), MaxCatalogTools))
		return out
	}
	for i, f := range fields {
		if len(out.list) == maxApprovalErrors {
			break
		}
		bad := func(msg string) {
			out.list = append(out.list, fmt.Errorf("entry %d (%q): %s", i+1, truncateValue(f), msg))
		}
		id, digest, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			bad("want ID=DIGEST, such as github.create_issue=5d0c6a7be1f2093c4a8d7e61.9b1c0e4f27aa3d10")
		case len(id) > maxToolRefLength || !toolNamePattern.MatchString(id):
			bad("the id " + toolNameRule)
		case !toolDigestPattern.MatchString(digest):
			bad(fmt.Sprintf("the digest must be 24 hex digits, a dot and 16 hex digits (%d characters, lower case), as status and `contextrouter tools approve` give it", ToolDigestLength))
		case out.approved[id] != "":
			bad(fmt.Sprintf("tool %q is approved twice", id))
		default:
			out.approved[id] = digest
		}
	}
	return out
}

// FormatApprovedTools writes approvals as the annotation holds them: one
// ID=DIGEST entry per line, sorted by id, ending with a newline (sep "\n"),
// or on one line separated by sep (",").
func FormatApprovedTools(approved map[string]string, sep string) string {
	var b strings.Builder
	for i, id := range slices.Sorted(maps.Keys(approved)) {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(id + "=" + approved[id])
	}
	if sep == "\n" && b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// ApprovedTools returns the approvals a source's annotation holds (nil when
// it has none). Validate refuses a value that does not parse; here such a
// value approves nothing.
func (r *ContextSource) ApprovedTools() map[string]string {
	v, ok := r.Annotations[AnnotationApprovedTools]
	if !ok {
		return nil
	}
	m, err := ParseApprovedTools(v)
	if err != nil {
		return map[string]string{}
	}
	return m
}

// HoldsTools reports whether the source is a Tools or MCP source.
func (s *ContextSourceSpec) HoldsTools() bool {
	return s.Type == SourceTools || s.Type == SourceMCP
}

// ToolApprovalMode is spec.tools.approval or spec.mcp.approval; "" for a
// source that holds no tools.
func (s *ContextSourceSpec) ToolApprovalMode() ToolApproval {
	switch {
	case s.Tools != nil:
		return s.Tools.Approval
	case s.MCP != nil:
		return s.MCP.Approval
	}
	return ""
}

// validateApprovedTools checks the approval annotation: only on a Tools or
// MCP source, and entries that parse.
func validateApprovedTools(p *field.Path, r *ContextSource) field.ErrorList {
	v, ok := r.Annotations[AnnotationApprovedTools]
	if !ok {
		return nil
	}
	fp := p.Key(AnnotationApprovedTools)
	if !r.Spec.HoldsTools() {
		return field.ErrorList{field.Forbidden(fp, fmt.Sprintf("tool approvals apply to Tools and MCP sources only (type is %s)", r.Spec.Type))}
	}
	var allErrs field.ErrorList
	for _, err := range parseApprovedTools(v).list {
		allErrs = append(allErrs, field.Invalid(fp, "", err.Error()))
	}
	return allErrs
}
