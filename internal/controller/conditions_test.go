package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// cond builds an expected condition without a transition time.
func cond(typ string, status metav1.ConditionStatus, reason v1alpha1.ConditionReason, gen int64, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: string(reason), ObservedGeneration: gen, Message: msg}
}

const (
	condTrue  = metav1.ConditionTrue
	condFalse = metav1.ConditionFalse
)

func testRoute(gen int64, parents ...string) *v1alpha1.ContextRoute {
	r := &v1alpha1.ContextRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "hr", Namespace: "ns", Generation: gen},
		Spec:       v1alpha1.ContextRouteSpec{Sources: []v1alpha1.LocalObjectReference{{Name: "docs"}}},
	}
	for _, p := range parents {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, v1alpha1.ParentReference{Name: p})
	}
	return r
}

func verdict(included bool, ps ...problem.Problem) bundle.Verdict {
	return bundle.Verdict{Kind: v1alpha1.KindContextRoute, Name: "hr", Included: included, Problems: ps}
}

func routeProblem(reason v1alpha1.ConditionReason, field, msg string) problem.Problem {
	return problem.Errorf(reason, v1alpha1.KindContextRoute, "hr", field, "%s", msg)
}

func TestConditionRouteEntry(t *testing.T) {
	accepted := cond("Accepted", condTrue, v1alpha1.ReasonAccepted, 3, `Accepted by ContextRouter "acme"`)
	resolved := cond("ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 3, "Every referenced ContextSource exists and is usable")
	cel := routeProblem(v1alpha1.ReasonInvalidCondition, "spec.when", "ERROR: <input>:1:8: Syntax error")
	missing1 := routeProblem(v1alpha1.ReasonSourceNotFound, "spec.sources[0].name", `ContextSource "a" not found`)
	missing2 := routeProblem(v1alpha1.ReasonSourceNotFound, "spec.sources[1].name", `ContextSource "b" not found`)
	leftOut := routeProblem(v1alpha1.ReasonInvalidSource, "spec.sources[0].name",
		`ContextSource "docs" is left out: spec.directory.path: "/etc/contextrouter/secrets" collides with /etc/contextrouter/secrets, which the router pod uses`)
	noAlternate := routeProblem(v1alpha1.ReasonAlternateNotFound, "spec.alternate",
		`ContextRoute "wiki" not found among the routes of the router (missing, attached elsewhere, or left out)`)
	cycle := routeProblem(v1alpha1.ReasonInvalidSpec, "spec.alternate", "alternates form a cycle: hr → wiki → hr")
	tests := []struct {
		name string
		v    bundle.Verdict
		want []metav1.Condition
	}{
		{"in the bundle", verdict(true), []metav1.Condition{accepted, resolved}},
		{"fit, but the build was refused (the router says why)", verdict(false), []metav1.Condition{accepted, resolved}},
		{"condition does not compile", verdict(false, cel), []metav1.Condition{
			cond("Accepted", condFalse, v1alpha1.ReasonInvalidCondition, 3, "spec.when: ERROR: <input>:1:8: Syntax error"), resolved}},
		{"sources missing", verdict(false, missing1, missing2), []metav1.Condition{accepted,
			cond("ResolvedRefs", condFalse, v1alpha1.ReasonSourceNotFound, 3,
				`spec.sources[0].name: ContextSource "a" not found; spec.sources[1].name: ContextSource "b" not found`)}},
		{"a source left out of the bundle is never 'all references resolved'", verdict(false, leftOut), []metav1.Condition{accepted,
			cond("ResolvedRefs", condFalse, v1alpha1.ReasonInvalidSource, 3, leftOut.Detail())}},
		{"alternate missing", verdict(false, noAlternate), []metav1.Condition{accepted,
			cond("ResolvedRefs", condFalse, v1alpha1.ReasonAlternateNotFound, 3, noAlternate.Detail())}},
		{"cycle of alternates", verdict(false, cycle), []metav1.Condition{
			cond("Accepted", condFalse, v1alpha1.ReasonInvalidSpec, 3, cycle.Detail()), resolved}},
		{"both", verdict(false, cel, missing1), []metav1.Condition{
			cond("Accepted", condFalse, v1alpha1.ReasonInvalidCondition, 3, cel.Detail()),
			cond("ResolvedRefs", condFalse, v1alpha1.ReasonSourceNotFound, 3, missing1.Detail())}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := routeEntry(testRoute(3), "acme", tt.v)
			if got.ParentRef.Name != "acme" || !reflect.DeepEqual(got.Conditions, tt.want) {
				t.Errorf("got %+v\nwant %+v", got.Conditions, tt.want)
			}
		})
	}
}

// entries makes n entries r00, r01, ... that report no problem.
func entries(n int, gen int64, t0 metav1.Time) []v1alpha1.RouteParentStatus {
	var out []v1alpha1.RouteParentStatus
	for i := range n {
		e := routeEntry(testRoute(gen), fmt.Sprintf("r%02d", i), verdict(true))
		e.Conditions = mergeConditions(nil, e.Conditions, t0)
		out = append(out, e)
	}
	return out
}

func TestConditionSetParent(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	good := func(router string) v1alpha1.RouteParentStatus { return routeEntry(testRoute(1), router, verdict(true)) }
	bad := func(router string) v1alpha1.RouteParentStatus {
		return routeEntry(testRoute(1), router, verdict(false, routeProblem(v1alpha1.ReasonInvalidCondition, "spec.when", "x")))
	}
	names := func(ps []v1alpha1.RouteParentStatus) string {
		var n []string
		for _, p := range ps {
			n = append(n, p.ParentRef.Name)
		}
		return strings.Join(n, ",")
	}

	var parents []v1alpha1.RouteParentStatus
	for _, r := range []string{"b", "c", "a"} {
		if !setParent(&parents, good(r), t0) {
			t.Errorf("adding %s reported no change", r)
		}
	}
	if names(parents) != "a,b,c" {
		t.Errorf("entries %s, want sorted a,b,c", names(parents))
	}
	if setParent(&parents, good("b"), t1) {
		t.Error("writing the same entry again reported a change")
	}
	if !setParent(&parents, bad("b"), t1) {
		t.Error("a flipped entry reported no change")
	}
	b := findParent(parents, "b")
	if acc, res := findCondition(b.Conditions, "Accepted"), findCondition(b.Conditions, "ResolvedRefs"); !acc.LastTransitionTime.Equal(&t1) || !res.LastTransitionTime.Equal(&t0) {
		t.Errorf("only the flipped condition gets the new time: Accepted %v, ResolvedRefs %v", acc.LastTransitionTime, res.LastTransitionTime)
	}
	if !removeParent(&parents, "b") || removeParent(&parents, "b") || names(parents) != "a,c" {
		t.Errorf("removeParent: %s", names(parents))
	}

	t.Run("bounded by MaxStatusParents; problems take the place of good news", func(t *testing.T) {
		full := entries(v1alpha1.MaxStatusParents, 1, t0)
		if setParent(&full, good("zz"), t1) || len(full) != v1alpha1.MaxStatusParents {
			t.Fatalf("a good entry was added to a full list (%d entries)", len(full))
		}
		if !setParent(&full, bad("zz"), t1) || len(full) != v1alpha1.MaxStatusParents {
			t.Fatalf("a failing entry must replace a good one; %d entries", len(full))
		}
		if findParent(full, "zz") == nil || findParent(full, fmt.Sprintf("r%02d", v1alpha1.MaxStatusParents-1)) != nil {
			t.Errorf("want zz in place of the last good entry: %s", names(full))
		}
		allBad := make([]v1alpha1.RouteParentStatus, 0, v1alpha1.MaxStatusParents)
		for i := range v1alpha1.MaxStatusParents {
			allBad = append(allBad, bad(fmt.Sprintf("r%02d", i)))
		}
		if setParent(&allBad, bad("zz"), t1) || len(allBad) != v1alpha1.MaxStatusParents {
			t.Errorf("a list of problems only must stay as it is")
		}
	})
}

func TestConditionRouteReady(t *testing.T) {
	ok := func(router string, gen int64) v1alpha1.RouteParentStatus {
		return routeEntry(testRoute(gen), router, verdict(true))
	}
	bad := func(router string, reason v1alpha1.ConditionReason, msg string) v1alpha1.RouteParentStatus {
		return routeEntry(testRoute(2), router, verdict(false, routeProblem(reason, "spec.x", msg)))
	}
	tests := []struct {
		name    string
		route   *v1alpha1.ContextRoute
		routers []string
		parents []v1alpha1.RouteParentStatus
		want    metav1.Condition
	}{
		{
			name:  "no router to attach to",
			route: testRoute(2),
			want:  cond("Ready", condFalse, v1alpha1.ReasonNoMatchingParent, 2, `No ContextRouter in namespace "ns" to attach to`),
		},
		{
			name:  "every router accepts it for this generation",
			route: testRoute(2), routers: []string{"a", "b"},
			parents: []v1alpha1.RouteParentStatus{ok("a", 2), ok("b", 2)},
			want:    cond("Ready", condTrue, v1alpha1.ReasonAccepted, 2, "Accepted by 2 ContextRouter(s) with all references resolved"),
		},
		{
			name:  "a router that has not written its entry yet",
			route: testRoute(2), routers: []string{"a", "b"},
			parents: []v1alpha1.RouteParentStatus{ok("a", 2)},
			want:    cond("Ready", condFalse, v1alpha1.ReasonPending, 2, `ContextRouter "b" has not judged generation 2 yet`),
		},
		{
			name:  "an entry for an older generation",
			route: testRoute(2), routers: []string{"a"},
			parents: []v1alpha1.RouteParentStatus{ok("a", 1)},
			want:    cond("Ready", condFalse, v1alpha1.ReasonPending, 2, `ContextRouter "a" has not judged generation 2 yet`),
		},
		{
			name:  "a named router does not exist",
			route: testRoute(2, "a", "ghost"), routers: []string{"a", "other"},
			parents: []v1alpha1.RouteParentStatus{ok("a", 2)},
			want:    cond("Ready", condFalse, v1alpha1.ReasonNoMatchingParent, 2, `ContextRouter "ghost" not found in namespace "ns"`),
		},
		{
			name:  "reason of the first failing router, messages of all",
			route: testRoute(2), routers: []string{"a", "b", "c"},
			parents: []v1alpha1.RouteParentStatus{ok("a", 2), bad("b", v1alpha1.ReasonInvalidCondition, "cel"), bad("c", v1alpha1.ReasonSourceNotFound, "src")},
			want: cond("Ready", condFalse, v1alpha1.ReasonInvalidCondition, 2,
				`ContextRouter "b": spec.x: cel; ContextRouter "c": spec.x: src`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routeReady(tt.route, tt.routers, tt.parents); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}

	t.Run("routers beyond a full status.parents are not pending", func(t *testing.T) {
		t0 := metav1.Now()
		full := entries(v1alpha1.MaxStatusParents, 2, t0)
		var routers []string
		for i := range v1alpha1.MaxStatusParents + 3 {
			routers = append(routers, fmt.Sprintf("r%02d", i))
		}
		got := routeReady(testRoute(2), routers, full)
		if got.Status != condTrue {
			t.Errorf("got %+v, want True: the listed routers all accept it", got)
		}
	})
}

func TestConditionRouteStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))

	t.Run("named routers that do not exist get an entry; Ready waits for the others", func(t *testing.T) {
		r := testRoute(1, "acme", "ghost")
		if !routeStatus(r, []string{"acme"}, t0) {
			t.Fatal("no change reported")
		}
		if err := wantParentNames(r, "ghost"); err != nil {
			t.Fatal(err)
		}
		if c := r.Status.Parents[0].Conditions[0]; c.Reason != string(v1alpha1.ReasonNoMatchingParent) || c.Message != `ContextRouter "ghost" not found in namespace "ns"` {
			t.Errorf("ghost entry %+v", c)
		}
		ready := findCondition(r.Status.Conditions, "Ready")
		if ready.Reason != string(v1alpha1.ReasonPending) || !strings.Contains(ready.Message, `ContextRouter "ghost" not found`) || r.Status.ObservedGeneration != 1 {
			t.Errorf("Ready %+v, observedGeneration %d", ready, r.Status.ObservedGeneration)
		}
		if routeStatus(r, []string{"acme"}, t1) {
			t.Error("an unchanged reconcile reported a change")
		}
	})
	t.Run("a router's own entry is kept; entries of routers it no longer attaches to go", func(t *testing.T) {
		r := testRoute(1, "acme")
		r.Status.Parents = []v1alpha1.RouteParentStatus{
			routeEntry(r, "acme", verdict(true)),
			routeEntry(r, "old", verdict(true)),
		}
		for i := range r.Status.Parents {
			r.Status.Parents[i].Conditions = mergeConditions(nil, r.Status.Parents[i].Conditions, t0)
		}
		if !routeStatus(r, []string{"acme", "old"}, t1) {
			t.Fatal("no change reported")
		}
		if err := wantParentNames(r, "acme"); err != nil {
			t.Error(err)
		}
		if c := findCondition(r.Status.Conditions, "Ready"); c.Status != condTrue {
			t.Errorf("Ready %+v", c)
		}
	})
	t.Run("waiting for a router is not written on its own", func(t *testing.T) {
		r := testRoute(1)
		if routeStatus(r, []string{"acme"}, t0) {
			t.Errorf("a new route whose router has not judged it yet was written: %+v", r.Status)
		}
		r = testRoute(1)
		r.Status.Parents = []v1alpha1.RouteParentStatus{routeEntry(r, "acme", verdict(true))}
		r.Status.Parents[0].Conditions = mergeConditions(nil, r.Status.Parents[0].Conditions, t0)
		routeStatus(r, []string{"acme"}, t0)
		r.Generation = 2
		if routeStatus(r, []string{"acme"}, t1) {
			t.Error("a spec change waiting for the router was written; the router writes Ready with its entry")
		}
	})
	t.Run("a router that appears replaces the NoMatchingParent entry with its own", func(t *testing.T) {
		r := testRoute(1, "ghost")
		routeStatus(r, nil, t0)
		routeStatus(r, []string{"ghost"}, t1)
		if err := wantParentNames(r); err != nil {
			t.Error(err)
		}
		if c := findCondition(r.Status.Conditions, "Ready"); c.Reason != string(v1alpha1.ReasonPending) {
			t.Errorf("Ready %+v, want Pending until the router writes its entry", c)
		}
	})
}

func wantParentNames(r *v1alpha1.ContextRoute, names ...string) error {
	var got []string
	for _, p := range r.Status.Parents {
		got = append(got, p.ParentRef.Name)
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		return fmt.Errorf("status.parents %q, want %q", got, names)
	}
	return nil
}

func httpSource(headers ...v1alpha1.HTTPHeader) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: "ns", Generation: 4},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{
			URL: "https://search.example.com/?q={{query}}", TextField: "text", Headers: headers,
		}},
	}
}

func secretHeader(name, secret, key string) v1alpha1.HTTPHeader {
	return v1alpha1.HTTPHeader{Name: name, ValueFrom: &v1alpha1.HeaderValueSource{
		SecretKeyRef: v1alpha1.SecretKeySelector{Name: secret, Key: key}}}
}

func gitSource(url, secret string) *v1alpha1.ContextSource {
	s := &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: "ns", Generation: 1},
		Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceGitRepo, GitRepo: &v1alpha1.GitRepoSource{URL: url}},
	}
	if secret != "" {
		s.Spec.GitRepo.Auth = &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: secret}}
	}
	return s
}

func dirSource(path string, vol *v1alpha1.DirectoryVolume) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "ns", Generation: 1},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{
			Path: path, Volume: vol}},
	}
}

func inlineSource() *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: "prompt", Namespace: "ns", Generation: 1},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceInline, Inline: &v1alpha1.InlineSource{
			Content: "Be brief."}},
	}
}

// refProblem is a source problem as a status shows it.
type refProblem struct {
	reason v1alpha1.ConditionReason
	detail string
}

func TestConditionSourceRefProblems(t *testing.T) {
	cmVol := &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-docs"}}
	pvcVol := &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki"}}
	tests := []struct {
		name   string
		src    *v1alpha1.ContextSource
		lookup sourceLookup
		want   []refProblem
	}{
		{name: "inline references nothing", src: inlineSource()},
		{
			name:   "header secret and key present",
			src:    httpSource(secretHeader("Authorization", "api", "token")),
			lookup: sourceLookup{secrets: map[string][]string{"api": {"token"}}},
		},
		{
			name: "header secret missing",
			src:  httpSource(secretHeader("Authorization", "api", "token")),
			want: []refProblem{{v1alpha1.ReasonSecretNotFound, `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "api" not found`}},
		},
		{
			name: "header key missing; plain headers ignored; index names the header",
			src: httpSource(
				v1alpha1.HTTPHeader{Name: "Accept", Value: new("application/json")},
				secretHeader("X-Key", "api", "key"),
				secretHeader("X-Org", "api", "org")),
			lookup: sourceLookup{secrets: map[string][]string{"api": {"org", "token"}}},
			want:   []refProblem{{v1alpha1.ReasonSecretNotFound, `spec.httpAPI.headers[1].valueFrom.secretKeyRef: Secret "api" has no key "key"`}},
		},
		{
			name: "a tool catalog's header secret missing",
			src: &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "petstore"}, Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceTools,
				Tools: &v1alpha1.ToolsSource{HTTP: &v1alpha1.CatalogHTTPSource{URL: "https://petstore.example.com/openapi.json",
					Headers: []v1alpha1.HTTPHeader{secretHeader("Authorization", "petstore", "token")}}, OpenAPI: &v1alpha1.OpenAPITools{}}}},
			want: []refProblem{{v1alpha1.ReasonSecretNotFound, `spec.tools.http.headers[0].valueFrom.secretKeyRef: Secret "petstore" not found`}},
		},
		{
			name:   "git auth secret with a token",
			src:    gitSource("https://git.example.com/docs.git", "git-creds"),
			lookup: sourceLookup{secrets: map[string][]string{"git-creds": {"token"}}},
		},
		{
			name: "git auth secret missing",
			src:  gitSource("https://git.example.com/docs.git", "git-creds"),
			want: []refProblem{{v1alpha1.ReasonSecretNotFound, `spec.gitRepo.auth.secretRef: Secret "git-creds" not found`}},
		},
		{
			name:   "git auth secret without any credential key",
			src:    gitSource("https://git.example.com/docs.git", "git-creds"),
			lookup: sourceLookup{secrets: map[string][]string{"git-creds": {"known_hosts", "user"}}},
			want: []refProblem{{v1alpha1.ReasonSecretNotFound,
				`spec.gitRepo.auth.secretRef: Secret "git-creds" has none of the keys "token", "username", "password" or "ssh-privatekey"`}},
		},
		{name: "git without auth", src: gitSource("https://git.example.com/docs.git", "")},
		{
			name:   "configmap present",
			src:    dirSource("", cmVol),
			lookup: sourceLookup{configMaps: map[string]bool{"hr-docs": true}},
		},
		{
			name: "configmap missing",
			src:  dirSource("", cmVol),
			want: []refProblem{{v1alpha1.ReasonConfigMapNotFound, `spec.directory.volume.configMap: ConfigMap "hr-docs" not found`}},
		},
		{
			name:   "a configmap found under another name does not count",
			src:    dirSource("", cmVol),
			lookup: sourceLookup{configMaps: map[string]bool{"other": true}},
			want:   []refProblem{{v1alpha1.ReasonConfigMapNotFound, `spec.directory.volume.configMap: ConfigMap "hr-docs" not found`}},
		},
		{
			name: "claim missing",
			src:  dirSource("/data", pvcVol),
			want: []refProblem{{v1alpha1.ReasonPersistentVolumeClaimNotFound,
				`spec.directory.volume.persistentVolumeClaim: PersistentVolumeClaim "wiki" not found`}},
		},
		{
			name:   "claim present",
			src:    dirSource("/data", pvcVol),
			lookup: sourceLookup{pvcs: map[string]bool{"wiki": true}},
		},
		{name: "directory without a volume", src: dirSource("/srv/docs", nil)},
		{
			name: "one missing secret named twice is reported per header",
			src:  httpSource(secretHeader("A", "api", "a"), secretHeader("B", "api", "b")),
			want: []refProblem{
				{v1alpha1.ReasonSecretNotFound, `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "api" not found`},
				{v1alpha1.ReasonSecretNotFound, `spec.httpAPI.headers[1].valueFrom.secretKeyRef: Secret "api" not found`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []refProblem
			for _, p := range sourceRefProblems(tt.src, tt.lookup) {
				got = append(got, refProblem{p.Reason, p.Detail()})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestConditionSourceSpecProblems(t *testing.T) {
	tests := []struct {
		name       string
		src        func() *v1alpha1.ContextSource
		wantReason v1alpha1.ConditionReason
		wantErr    []string // substrings; none means valid
	}{
		{name: "inline", src: inlineSource},
		{name: "http with a secret header (not resolved)", src: func() *v1alpha1.ContextSource {
			return httpSource(secretHeader("Authorization", "api", "token"))
		}},
		{name: "directory that does not exist is not read", src: func() *v1alpha1.ContextSource {
			return dirSource("/nonexistent/contextrouter-test", nil)
		}},
		{name: "directory on a volume", src: func() *v1alpha1.ContextSource {
			return dirSource("", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "cm"}})
		}},
		{name: "unreachable git repository is not fetched", src: func() *v1alpha1.ContextSource {
			return gitSource("https://127.0.0.1:1/none.git", "creds")
		}},
		{
			name: "type and block disagree (validation)",
			src: func() *v1alpha1.ContextSource {
				s := inlineSource()
				s.Spec.Type = v1alpha1.SourceDirectory
				return s
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErr:    []string{"spec.directory", "spec.inline"},
		},
		{
			name: "invalid include glob (validation)",
			src: func() *v1alpha1.ContextSource {
				s := dirSource("/srv", nil)
				s.Spec.Directory.Include = []string{"docs/[a"}
				return s
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErr:    []string{"spec.directory.include"},
		},
		{
			name: "GET with a body (source factory)",
			src: func() *v1alpha1.ContextSource {
				s := httpSource()
				s.Spec.HTTPAPI.Body = `{"q": {{query}}}`
				return s
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErr:    []string{"spec.httpAPI.body"},
		},
		{
			name: "negative max file size",
			src: func() *v1alpha1.ContextSource {
				s := dirSource("/srv", nil)
				q := resource.MustParse("-1")
				s.Spec.Directory.MaxFileSize = &q
				return s
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErr:    []string{"spec.directory.maxFileSize"},
		},
		{
			name: "a volume no router pod can mount",
			src: func() *v1alpha1.ContextSource {
				return dirSource("/etc/contextrouter/secrets", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "cm"}})
			},
			wantReason: v1alpha1.ReasonInvalidMount,
			wantErr:    []string{`spec.directory.path: "/etc/contextrouter/secrets" collides with /etc/contextrouter/secrets`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src()
			orig := src.DeepCopy()
			ps := sourceSpecProblems(src)
			if !reflect.DeepEqual(src, orig) {
				t.Errorf("sourceSpecProblems modified its argument")
			}
			if len(tt.wantErr) == 0 {
				if len(ps) > 0 {
					t.Fatalf("unexpected problems: %v", ps)
				}
				return
			}
			if len(ps) == 0 {
				t.Fatalf("no problem; want one mentioning %q", tt.wantErr)
			}
			if ps[0].Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", ps[0].Reason, tt.wantReason)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(ps.Details(), s) {
					t.Errorf("problems %q do not mention %q", ps.Details(), s)
				}
			}
		})
	}
}

// A URL's user part (a token or password, percent-encoded or not) never
// reaches the Ready condition, whether validation or the source factory
// finds the problem; the URL is shown with "***" in its place.
func TestConditionSourceHidesURLCredentials(t *testing.T) {
	tests := []struct {
		name string
		src  *v1alpha1.ContextSource
		want string
	}{
		{"git scheme (validation)", gitSource("gopher://ghp_Tok3nValue@git.example.com/r.git", ""), `"gopher://***@git.example.com/r.git"`},
		{"git no host (validation)", gitSource("https://ghp%5FTok3nValue@/r.git", ""), `"https://***@/r.git"`},
		{"git file host (factory)", gitSource("file://ghp_Tok3nValue:pw-Tok3nValue@server/srv/r.git", ""), `"file://***@server/srv/r.git": a file URL cannot name a host`},
		{"git unparsable (validation)", gitSource("https://ghp_Tok3nValue:x/y@host/r.git", ""), "is not a valid URL"},
		{"http no host (validation)", func() *v1alpha1.ContextSource {
			s := httpSource()
			s.Spec.HTTPAPI.URL = "https://user:pw-Tok3nValue@/?q={{query}}"
			return s
		}(), `"https://***@/?q={{query}}": must name a host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sourceStatus(tt.src, sourceSpecProblems(tt.src), nil, metav1.Now())
			ready := meta.FindStatusCondition(tt.src.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != string(v1alpha1.ReasonInvalidSpec) {
				t.Fatalf("Ready = %+v, want False/InvalidSpec", ready)
			}
			if strings.Contains(ready.Message, "Tok3nValue") || strings.Contains(ready.Message, "ghp") {
				t.Errorf("condition message shows the credentials: %s", ready.Message)
			}
			if !strings.Contains(ready.Message, tt.want) {
				t.Errorf("condition message %q does not contain %q", ready.Message, tt.want)
			}
		})
	}
}

func TestConditionSourceReady(t *testing.T) {
	spec := problem.Errorf(v1alpha1.ReasonInvalidSpec, "ContextSource", "s", "spec.httpAPI.body", "a GET request has no body")
	secret := problem.Errorf(v1alpha1.ReasonSecretNotFound, "ContextSource", "s", "spec.x", "no secret")
	cm := problem.Errorf(v1alpha1.ReasonConfigMapNotFound, "ContextSource", "s", "spec.y", "no map")
	excl := []v1alpha1.SourceExclusion{
		{Router: "a", Reason: v1alpha1.ReasonInvalidMount, Message: "spec.directory.path: clash"},
		{Router: "b", Reason: v1alpha1.ReasonInvalidMount, Message: "spec.directory.path: clash too"},
	}
	tests := []struct {
		name     string
		own      problem.List
		excluded []v1alpha1.SourceExclusion
		want     metav1.Condition
	}{
		{name: "valid", want: cond("Ready", condTrue, v1alpha1.ReasonValid, 4,
			"Spec is valid, every referenced object exists, and no ContextRouter leaves it out")},
		{name: "own problems: first reason, every message", own: problem.List{secret, cm},
			want: cond("Ready", condFalse, v1alpha1.ReasonSecretNotFound, 4, "spec.x: no secret; spec.y: no map")},
		{name: "own problems explain exclusions", own: problem.List{spec}, excluded: excl,
			want: cond("Ready", condFalse, v1alpha1.ReasonInvalidSpec, 4, "spec.httpAPI.body: a GET request has no body")},
		{name: "left out by routers is never Valid", excluded: excl,
			want: cond("Ready", condFalse, v1alpha1.ReasonInvalidMount, 4,
				`left out by ContextRouter "a": spec.directory.path: clash; left out by ContextRouter "b": spec.directory.path: clash too`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sourceReady(4, tt.own, tt.excluded); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestConditionSourceStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	src := httpSource(secretHeader("Authorization", "api", "token"))
	missing := sourceRefProblems(src, sourceLookup{})
	if !sourceStatus(src, missing, nil, t0) {
		t.Fatal("no change reported")
	}
	want := v1alpha1.ContextSourceStatus{ObservedGeneration: 4, Conditions: []metav1.Condition{{
		Type: "Ready", Status: condFalse, Reason: string(v1alpha1.ReasonSecretNotFound), ObservedGeneration: 4, LastTransitionTime: t0,
		Message: `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "api" not found`,
	}}}
	if !reflect.DeepEqual(src.Status, want) {
		t.Fatalf("got %+v\nwant %+v", src.Status, want)
	}
	if sourceStatus(src, missing, nil, t1) {
		t.Errorf("unchanged facts changed the status: %+v", src.Status)
	}
	if !sourceStatus(src, nil, nil, t1) {
		t.Fatal("the secret appeared: no change reported")
	}
	if c := src.Status.Conditions[0]; c.Status != condTrue || c.Reason != string(v1alpha1.ReasonValid) || !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("after the secret appeared: %+v", c)
	}

	// Entries of routers that are gone are dropped; the others make Ready False.
	src.Status.ExcludedBy = []v1alpha1.SourceExclusion{
		{Router: "acme", Reason: v1alpha1.ReasonInvalidMount, Message: "m"},
		{Router: "gone", Reason: v1alpha1.ReasonInvalidMount, Message: "m"},
	}
	if !sourceStatus(src, nil, []string{"acme"}, t1) || len(src.Status.ExcludedBy) != 1 || src.Status.ExcludedBy[0].Router != "acme" {
		t.Fatalf("excludedBy %+v, want only acme", src.Status.ExcludedBy)
	}
	if c := src.Status.Conditions[0]; c.Status != condFalse || c.Reason != string(v1alpha1.ReasonInvalidMount) {
		t.Errorf("Ready %+v, want False InvalidMount", c)
	}
}

func TestConditionSourceExclusion(t *testing.T) {
	src := dirSource("/etc/contextrouter/secrets", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "cm"}})
	src.Generation = 5
	mount := problem.Errorf(v1alpha1.ReasonInvalidMount, "ContextSource", "docs", "spec.directory.path", "clash")
	v := bundle.Verdict{Kind: "ContextSource", Name: "docs", Problems: problem.List{mount}}
	if got := sourceExclusion(src, "acme", bundle.Verdict{Kind: "ContextSource", Name: "docs", Included: true}); got != nil {
		t.Errorf("an included source: %+v", got)
	}
	if got := sourceExclusion(src, "acme", bundle.Verdict{Kind: "ContextSource", Name: "docs"}); got != nil {
		t.Errorf("a source no included route uses is not left out for a problem of its own: %+v", got)
	}
	want := v1alpha1.SourceExclusion{Router: "acme", Reason: v1alpha1.ReasonInvalidMount, Message: "spec.directory.path: clash", ObservedGeneration: 5}
	got := sourceExclusion(src, "acme", v)
	if got == nil || *got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}

	var list []v1alpha1.SourceExclusion
	for _, r := range []string{"b", "c", "a"} {
		e := want
		e.Router = r
		if !setExclusion(&list, r, &e) {
			t.Errorf("adding %s reported no change", r)
		}
	}
	if list[0].Router != "a" || list[1].Router != "b" || list[2].Router != "c" {
		t.Errorf("not sorted: %+v", list)
	}
	e := want
	e.Router = "b"
	if setExclusion(&list, "b", &e) {
		t.Error("the same entry reported a change")
	}
	if !setExclusion(&list, "b", nil) || setExclusion(&list, "b", nil) || len(list) != 2 {
		t.Errorf("removing: %+v", list)
	}
	full := make([]v1alpha1.SourceExclusion, v1alpha1.MaxStatusParents)
	for i := range full {
		full[i] = want
		full[i].Router = fmt.Sprintf("r%02d", i)
	}
	e.Router = "zz"
	if setExclusion(&full, "zz", &e) || len(full) != v1alpha1.MaxStatusParents {
		t.Errorf("a full list grew to %d", len(full))
	}
}

func testPermission(gen int64) *v1alpha1.AgentPermission {
	return &v1alpha1.AgentPermission{
		ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: "ns", Generation: gen},
		Spec: v1alpha1.AgentPermissionSpec{
			Agents:       []string{"support-bot"},
			AllowSources: []string{"faq", "docs"},
			DenySources:  []string{"payroll", "docs"},
		},
	}
}

func TestConditionPermissionMissingSources(t *testing.T) {
	tests := []struct {
		name   string
		exists map[string]bool
		want   []string
	}{
		{"all exist", map[string]bool{"faq": true, "docs": true, "payroll": true}, nil},
		{"none exist, sorted and unique", nil, []string{"docs", "faq", "payroll"}},
		{"false counts as missing", map[string]bool{"faq": true, "docs": false, "payroll": true}, []string{"docs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := permissionMissingSources(testPermission(1), tt.exists); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConditionPermission(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.AgentPermission)
		missing []string
		want    []metav1.Condition
	}{
		{
			name: "valid and resolved",
			want: []metav1.Condition{
				cond("ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 5, "All referenced ContextSources exist"),
				cond("Ready", condTrue, v1alpha1.ReasonValid, 5, "Spec is valid"),
			},
		},
		{
			name:    "a missing source leaves the permission Ready",
			missing: []string{"payroll"},
			want: []metav1.Condition{
				cond("ResolvedRefs", condFalse, v1alpha1.ReasonSourceNotFound, 5, `ContextSource "payroll" not found`),
				cond("Ready", condTrue, v1alpha1.ReasonValid, 5, "Spec is valid"),
			},
		},
		{
			name:   "an invalid spec is not Ready",
			mutate: func(p *v1alpha1.AgentPermission) { p.Spec.DenyPaths = []string{"secret/[x"} },
			want: []metav1.Condition{
				cond("ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 5, "All referenced ContextSources exist"),
				cond("Ready", condFalse, v1alpha1.ReasonInvalidSpec, 5, ""), // message checked below
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPermission(5)
			if tt.mutate != nil {
				tt.mutate(p)
			}
			got := permissionConditions(p, tt.missing)
			if len(got) == 2 && tt.want[1].Message == "" {
				if !strings.Contains(got[1].Message, "spec.denyPaths[0]") {
					t.Errorf("Ready message %q does not name spec.denyPaths[0]", got[1].Message)
				}
				got[1].Message = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestConditionPermissionStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := testPermission(2)
	st := permissionStatus(p, []string{"faq"}, t0)
	if st.ObservedGeneration != 2 || len(st.Conditions) != 2 {
		t.Fatalf("unexpected status %+v", st)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 2 || !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("%s: generation %d time %v", c.Type, c.ObservedGeneration, c.LastTransitionTime)
		}
	}
}

func TestConditionMerge(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Hour))
	withTime := func(c metav1.Condition, ts metav1.Time) metav1.Condition { c.LastTransitionTime = ts; return c }
	readyT := cond("Ready", condTrue, "A", 1, "a")
	readyF := cond("Ready", condFalse, "B", 2, "b")
	other := cond("Other", condTrue, "O", 1, "o")
	tests := []struct {
		name    string
		old     []metav1.Condition
		desired []metav1.Condition
		want    []metav1.Condition
	}{
		{"new condition gets now", nil, []metav1.Condition{readyT}, []metav1.Condition{withTime(readyT, now)}},
		{
			"same status keeps the old time but takes the new reason, message and generation",
			[]metav1.Condition{withTime(cond("Ready", condTrue, "Old", 1, "old"), t0)},
			[]metav1.Condition{cond("Ready", condTrue, "New", 3, "new")},
			[]metav1.Condition{withTime(cond("Ready", condTrue, "New", 3, "new"), t0)},
		},
		{"flipped status gets now", []metav1.Condition{withTime(readyT, t0)}, []metav1.Condition{readyF}, []metav1.Condition{withTime(readyF, now)}},
		{"old time zero gets now", []metav1.Condition{readyT}, []metav1.Condition{readyT}, []metav1.Condition{withTime(readyT, now)}},
		{"types not desired are dropped", []metav1.Condition{withTime(other, t0), withTime(readyT, t0)}, []metav1.Condition{readyT}, []metav1.Condition{withTime(readyT, t0)}},
		{"order of desired", []metav1.Condition{withTime(readyT, t0)}, []metav1.Condition{other, readyT}, []metav1.Condition{withTime(other, now), withTime(readyT, t0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mergeConditions(tt.old, tt.desired, now); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestConditionMessageLimit(t *testing.T) {
	tests := []struct {
		name, msg string
		wantCut   bool
	}{
		{"short", "fine", false},
		{"exactly the limit", strings.Repeat("a", maxConditionMessage), false},
		{"ascii over the limit", strings.Repeat("a", maxConditionMessage+1), true},
		{"multibyte runes over the limit", strings.Repeat("é", maxConditionMessage), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newCondition("Ready", false, "R", 1, tt.msg).Message
			if len(got) > maxConditionMessage || !utf8.ValidString(got) {
				t.Fatalf("message of %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if cut := got != tt.msg; cut != tt.wantCut {
				t.Fatalf("cut = %v, want %v", cut, tt.wantCut)
			}
			if tt.wantCut && !strings.HasSuffix(got, "(truncated)") {
				t.Errorf("a cut message says so; ends %q", got[len(got)-20:])
			}
		})
	}
}

func TestConditionQuoteList(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"a"}, `"a"`},
		{[]string{"a", "b"}, `"a" or "b"`},
		{[]string{"a", "b", "c"}, `"a", "b" or "c"`},
	}
	for _, tt := range tests {
		if got := quoteList(tt.in, "or"); got != tt.want {
			t.Errorf("quoteList(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestConditionIndexExtractors(t *testing.T) {
	route := testRoute(1, "b", "a")
	route.Spec.Sources = []v1alpha1.LocalObjectReference{{Name: "web"}, {Name: "docs"}}
	perm := testPermission(1)
	scoped := testPermission(1)
	scoped.Spec.SourceDenyPaths = []v1alpha1.SourceDenyPaths{{Source: "wiki", Paths: []string{"hr/**"}}, {Source: "docs", Paths: []string{"x"}}}
	git := gitSource("https://git.example.com/x.git", "git-creds")
	http := httpSource(secretHeader("A", "api", "a"), secretHeader("B", "api", "b"), secretHeader("C", "other", "c"))
	cm := dirSource("", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-docs"}})
	pvc := dirSource("", &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki"}})
	tests := []struct {
		name string
		fn   client.IndexerFunc
		obj  client.Object
		want []string
	}{
		{"route sources", RouteSourceNames, route, []string{"docs", "web"}},
		{"route parents", RouteParentNames, route, []string{"a", "b"}},
		{"route without parents attaches to all", RouteParentNames, testRoute(1), []string{AllParents}},
		{"permission without parents applies to all", PermissionParentNames, perm, []string{AllParents}},
		{"permission sources", PermissionSourceNames, perm, []string{"docs", "faq", "payroll"}},
		{"permission sourceDenyPaths sources", PermissionSourceNames, scoped, []string{"docs", "faq", "payroll", "wiki"}},
		{"git secret", SourceSecretNames, git, []string{"git-creds"}},
		{"header secrets", SourceSecretNames, http, []string{"api", "other"}},
		{"inline has no secrets", SourceSecretNames, inlineSource(), nil},
		{"configmap", SourceConfigMapNames, cm, []string{"hr-docs"}},
		{"no configmap on a claim", SourceConfigMapNames, pvc, nil},
		{"claim", SourcePVCNames, pvc, []string{"wiki"}},
		{"wrong kind", RouteSourceNames, perm, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.obj); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
