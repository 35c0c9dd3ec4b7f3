package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// RouteCase is one labelled question of `eval routes`: the routes that
// should serve it.
type RouteCase struct {
	// Request is the question: text, agent, tags and metadata.
	engine.Request
	ExpectedRoutes []string `json:"expected_routes"`
	// Line is the case's line in its file.
	Line int `json:"-"`
}

// LoadRouteCases reads JSON lines of RouteCase. expected_routes is required
// ([] says that no route should serve) and may name only the given routes;
// errors name the file, the line and the field.
func LoadRouteCases(path string, routes []string) ([]RouteCase, error) {
	var out []RouteCase
	err := scanLines(path, func(n int, line []byte) error {
		if len(strings.TrimSpace(string(line))) == 0 {
			return nil
		}
		var c struct {
			RouteCase
			Expected *[]string `json:"expected_routes"`
		}
		dec := json.NewDecoder(strings.NewReader(string(line)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		switch {
		case strings.TrimSpace(c.Text) == "":
			return fmt.Errorf("%s:%d: text: must not be empty", path, n)
		case c.Expected == nil:
			return fmt.Errorf("%s:%d: expected_routes: required ([] when no route should serve)", path, n)
		}
		rc := c.RouteCase
		rc.ExpectedRoutes, rc.Line = *c.Expected, n
		for i, r := range rc.ExpectedRoutes {
			if !slices.Contains(routes, r) {
				return fmt.Errorf("%s:%d: expected_routes[%d]: %q is not a route of the router (its routes: %s)",
					path, n, i, r, strings.Join(routes, ", "))
			}
			if slices.Contains(rc.ExpectedRoutes[:i], r) {
				return fmt.Errorf("%s:%d: expected_routes[%d]: %q is listed twice", path, n, i, r)
			}
		}
		out = append(out, rc)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s: no cases", path)
	}
	return out, err
}

// RouteReport is the result of `eval routes`.
type RouteReport struct {
	Cases int `json:"cases"`
	// RouteAccuracy is the share of cases whose served routes are exactly the expected ones.
	RouteAccuracy float64 `json:"route_accuracy"`
	// MicroPrecision and MicroRecall count (case, route) pairs over all cases.
	MicroPrecision float64          `json:"micro_precision"`
	MicroRecall    float64          `json:"micro_recall"`
	Routes         []RouteScore     `json:"routes"`
	Results        []RouteResultRow `json:"results"`
}

// RouteScore is one route's precision and recall. Precision is null for a
// route that never served, recall for a route that no case expects.
type RouteScore struct {
	Route     string   `json:"route"`
	Expected  int      `json:"expected"`
	Served    int      `json:"served"`
	Correct   int      `json:"correct"`
	Precision *float64 `json:"precision"`
	Recall    *float64 `json:"recall"`
}

// RouteResultRow is one case's outcome.
type RouteResultRow struct {
	Line        int                 `json:"line"`
	Text        string              `json:"text"`
	Expected    []string            `json:"expected_routes"`
	Served      []string            `json:"served_routes"`
	Correct     bool                `json:"correct"`
	Missing     []string            `json:"missing"`
	Unexpected  []string            `json:"unexpected"`
	RouteErrors []engine.RouteError `json:"route_errors"`
}

// Routes asks the snapshot which routes serve each case (conditions and
// fallbacks; no source is read) and scores them against the expected ones.
// A case the engine refuses (a bad request) is an error naming its line.
func Routes(ctx context.Context, snap *engine.Snapshot, path string, cases []RouteCase) (*RouteReport, error) {
	names := snap.Routes()
	expected := make(map[string]int, len(names))
	served := make(map[string]int, len(names))
	correct := make(map[string]int, len(names))
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	rep := &RouteReport{Cases: len(cases), Routes: []RouteScore{}, Results: make([]RouteResultRow, 0, len(cases))}
	exact, tp, nServed, nExpected := 0, 0, 0, 0
	for _, c := range cases {
		matches, errs, err := snap.MatchRoutes(ctx, c.Request)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, c.Line, err)
		}
		row := RouteResultRow{Line: c.Line, Text: c.Text, Expected: c.ExpectedRoutes, Served: []string{},
			Missing: []string{}, Unexpected: []string{}, RouteErrors: errs}
		for _, m := range matches {
			row.Served = append(row.Served, m.Route)
			served[m.Route]++
			if slices.Contains(c.ExpectedRoutes, m.Route) {
				correct[m.Route]++
				tp++
			} else {
				row.Unexpected = append(row.Unexpected, m.Route)
			}
		}
		for _, r := range c.ExpectedRoutes {
			expected[r]++
			if !slices.Contains(row.Served, r) {
				row.Missing = append(row.Missing, r)
			}
		}
		nServed += len(row.Served)
		nExpected += len(c.ExpectedRoutes)
		row.Correct = len(row.Missing) == 0 && len(row.Unexpected) == 0
		if row.Correct {
			exact++
		}
		rep.Results = append(rep.Results, row)
	}
	rep.RouteAccuracy = ratio(exact, len(cases))
	// With nothing served there is no wrong route (precision 1); with nothing
	// expected, no missed one (recall 1).
	rep.MicroPrecision, rep.MicroRecall = 1, 1
	if nServed > 0 {
		rep.MicroPrecision = ratio(tp, nServed)
	}
	if nExpected > 0 {
		rep.MicroRecall = ratio(tp, nExpected)
	}
	for _, r := range names {
		s := RouteScore{Route: r, Expected: expected[r], Served: served[r], Correct: correct[r]}
		if s.Served > 0 {
			p := ratio(s.Correct, s.Served)
			s.Precision = &p
		}
		if s.Expected > 0 {
			rc := ratio(s.Correct, s.Expected)
			s.Recall = &rc
		}
		rep.Routes = append(rep.Routes, s)
	}
	return rep, nil
}

// ratio is a/b rounded to 4 decimals (b > 0).
func ratio(a, b int) float64 {
	return math.Round(float64(a)/float64(b)*1e4) / 1e4
}
