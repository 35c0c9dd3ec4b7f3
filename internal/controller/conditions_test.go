package controller

import (
	"errors"
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
	"github.com/contextrouter/contextrouter/internal/engine"
)

// cond builds an expected condition without a transition time.
func cond(typ string, status metav1.ConditionStatus, reason string, gen int64, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: gen, Message: msg}
}

const (
	condTrue  = metav1.ConditionTrue
	condFalse = metav1.ConditionFalse
)

func celError(t *testing.T, expr string) error {
	t.Helper()
	_, err := engine.CompileCondition(expr)
	if err == nil {
		t.Fatalf("CompileCondition(%q) compiled; the test needs an invalid condition", expr)
	}
	return err
}

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

func parent(name string, conds ...metav1.Condition) v1alpha1.RouteParentStatus {
	return v1alpha1.RouteParentStatus{ParentRef: v1alpha1.ParentReference{Name: name}, Conditions: conds}
}

func TestConditionRouteParents(t *testing.T) {
	badCEL := celError(t, "text ==")
	accepted := func(router string) metav1.Condition {
		return cond("Accepted", condTrue, ReasonAccepted, 3, `Attached to ContextRouter "`+router+`"`)
	}
	resolved := cond("ResolvedRefs", condTrue, ReasonResolvedRefs, 3, "All referenced ContextSources exist")
	tests := []struct {
		name  string
		route *v1alpha1.ContextRoute
		facts routeFacts
		want  []v1alpha1.RouteParentStatus
	}{
		{
			name:  "empty parentRefs attach to every router, sorted",
			route: testRoute(3),
			facts: routeFacts{routers: []string{"zeta", "acme"}},
			want: []v1alpha1.RouteParentStatus{
				parent("acme", accepted("acme"), resolved),
				parent("zeta", accepted("zeta"), resolved),
			},
		},
		{
			name:  "parentRefs select routers; others are not parents",
			route: testRoute(3, "zeta"),
			facts: routeFacts{routers: []string{"acme", "zeta"}},
			want:  []v1alpha1.RouteParentStatus{parent("zeta", accepted("zeta"), resolved)},
		},
		{
			name:  "no router in the namespace gives no parents",
			route: testRoute(3),
			facts: routeFacts{},
			want:  []v1alpha1.RouteParentStatus{},
		},
		{
			name:  "a parentRef naming no router is NoMatchingParent",
			route: testRoute(3, "missing", "acme"),
			facts: routeFacts{routers: []string{"acme"}},
			want: []v1alpha1.RouteParentStatus{
				parent("acme", accepted("acme"), resolved),
				parent("missing", cond("Accepted", condFalse, ReasonNoMatchingParent, 3, `ContextRouter "missing" not found in namespace "ns"`), resolved),
			},
		},
		{
			name:  "invalid CEL is InvalidCondition with the compiler's message",
			route: testRoute(3),
			facts: routeFacts{routers: []string{"acme"}, conditionErr: badCEL},
			want: []v1alpha1.RouteParentStatus{
				parent("acme", cond("Accepted", condFalse, ReasonInvalidCondition, 3, "spec.when: "+badCEL.Error()), resolved),
			},
		},
		{
			name:  "a missing router outranks invalid CEL on its own entry",
			route: testRoute(3, "gone"),
			facts: routeFacts{conditionErr: badCEL},
			want: []v1alpha1.RouteParentStatus{
				parent("gone", cond("Accepted", condFalse, ReasonNoMatchingParent, 3, `ContextRouter "gone" not found in namespace "ns"`), resolved),
			},
		},
		{
			name:  "missing sources fail ResolvedRefs on every parent",
			route: testRoute(3),
			facts: routeFacts{routers: []string{"a", "b"}, missingSources: []string{"web", "docs", "web"}},
			want: []v1alpha1.RouteParentStatus{
				parent("a", accepted("a"), cond("ResolvedRefs", condFalse, ReasonSourceNotFound, 3, `ContextSources "docs" and "web" not found`)),
				parent("b", accepted("b"), cond("ResolvedRefs", condFalse, ReasonSourceNotFound, 3, `ContextSources "docs" and "web" not found`)),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := routeParents(tt.route, tt.facts)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("routeParents:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestConditionResolvedRefs(t *testing.T) {
	tests := []struct {
		name    string
		missing []string
		want    metav1.Condition
	}{
		{"none", nil, cond("ResolvedRefs", condTrue, ReasonResolvedRefs, 7, "All referenced ContextSources exist")},
		{"one", []string{"docs"}, cond("ResolvedRefs", condFalse, ReasonSourceNotFound, 7, `ContextSource "docs" not found`)},
		{"duplicates collapse", []string{"docs", "docs"}, cond("ResolvedRefs", condFalse, ReasonSourceNotFound, 7, `ContextSource "docs" not found`)},
		{"several, sorted", []string{"c", "a", "b"}, cond("ResolvedRefs", condFalse, ReasonSourceNotFound, 7, `ContextSources "a", "b" and "c" not found`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string(nil), tt.missing...)
			if got := resolvedRefsCondition(7, tt.missing); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(in, tt.missing) {
				t.Errorf("the argument was modified: %v, was %v", tt.missing, in)
			}
		})
	}
}

func TestConditionRouteReady(t *testing.T) {
	ok := func(typ string) metav1.Condition { return cond(typ, condTrue, "Fine", 2, "fine") }
	bad := func(typ, reason, msg string) metav1.Condition { return cond(typ, condFalse, reason, 2, msg) }
	tests := []struct {
		name    string
		parents []v1alpha1.RouteParentStatus
		want    metav1.Condition
	}{
		{
			name: "no parents",
			want: cond("Ready", condFalse, ReasonNoMatchingParent, 2, `No ContextRouter in namespace "ns" to attach to`),
		},
		{
			name:    "every parent accepted and resolved",
			parents: []v1alpha1.RouteParentStatus{parent("a", ok("Accepted"), ok("ResolvedRefs")), parent("b", ok("Accepted"), ok("ResolvedRefs"))},
			want:    cond("Ready", condTrue, ReasonAccepted, 2, "Accepted by 2 ContextRouter(s) with all references resolved"),
		},
		{
			name: "reason of the first failure, messages deduplicated",
			parents: []v1alpha1.RouteParentStatus{
				parent("a", bad("Accepted", ReasonInvalidCondition, "cel"), bad("ResolvedRefs", ReasonSourceNotFound, "src")),
				parent("b", bad("Accepted", ReasonInvalidCondition, "cel"), bad("ResolvedRefs", ReasonSourceNotFound, "src")),
			},
			want: cond("Ready", condFalse, ReasonInvalidCondition, 2, "cel; src"),
		},
		{
			name: "ResolvedRefs alone",
			parents: []v1alpha1.RouteParentStatus{
				parent("a", ok("Accepted"), bad("ResolvedRefs", ReasonSourceNotFound, "src")),
			},
			want: cond("Ready", condFalse, ReasonSourceNotFound, 2, "src"),
		},
		{
			name: "a later parent's failure still fails Ready",
			parents: []v1alpha1.RouteParentStatus{
				parent("a", ok("Accepted"), ok("ResolvedRefs")),
				parent("b", bad("Accepted", ReasonNoMatchingParent, "no b"), ok("ResolvedRefs")),
			},
			want: cond("Ready", condFalse, ReasonNoMatchingParent, 2, "no b"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routeReady(testRoute(2), tt.parents); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestConditionRouteStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	good := routeFacts{routers: []string{"acme"}}
	missing := routeFacts{routers: []string{"acme"}, missingSources: []string{"docs"}}

	t.Run("first status stamps now everywhere", func(t *testing.T) {
		st := routeStatus(testRoute(1), good, t0)
		if st.ObservedGeneration != 1 || len(st.Parents) != 1 || len(st.Conditions) != 1 {
			t.Fatalf("unexpected shape: %+v", st)
		}
		for _, c := range append(st.Parents[0].Conditions, st.Conditions...) {
			if !c.LastTransitionTime.Equal(&t0) {
				t.Errorf("%s: LastTransitionTime %v, want %v", c.Type, c.LastTransitionTime, t0)
			}
		}
	})
	t.Run("an unchanged reconcile reproduces the status exactly", func(t *testing.T) {
		r := testRoute(1)
		r.Status = routeStatus(r, good, t0)
		if again := routeStatus(r, good, t1); !reflect.DeepEqual(again, r.Status) {
			t.Errorf("status changed without a cause:\n got %+v\nwant %+v", again, r.Status)
		}
	})
	t.Run("only flipped conditions get the new time; generation follows", func(t *testing.T) {
		r := testRoute(1)
		r.Status = routeStatus(r, good, t0)
		r.Generation = 2
		st := routeStatus(r, missing, t1)
		if st.ObservedGeneration != 2 {
			t.Errorf("observedGeneration %d, want 2", st.ObservedGeneration)
		}
		acc, res := findCondition(st.Parents[0].Conditions, "Accepted"), findCondition(st.Parents[0].Conditions, "ResolvedRefs")
		ready := findCondition(st.Conditions, "Ready")
		if !acc.LastTransitionTime.Equal(&t0) || acc.ObservedGeneration != 2 {
			t.Errorf("Accepted did not flip: want time %v gen 2, got %+v", t0, acc)
		}
		if !res.LastTransitionTime.Equal(&t1) || res.Status != condFalse {
			t.Errorf("ResolvedRefs flipped: want False at %v, got %+v", t1, res)
		}
		if !ready.LastTransitionTime.Equal(&t1) || ready.Reason != ReasonSourceNotFound || ready.ObservedGeneration != 2 {
			t.Errorf("Ready: want False SourceNotFound at %v gen 2, got %+v", t1, ready)
		}
	})
	t.Run("a parent that goes away leaves status.parents", func(t *testing.T) {
		r := testRoute(1)
		r.Status = routeStatus(r, routeFacts{routers: []string{"a", "b"}}, t0)
		st := routeStatus(r, routeFacts{routers: []string{"b"}}, t1)
		if len(st.Parents) != 1 || st.Parents[0].ParentRef.Name != "b" {
			t.Fatalf("parents %+v, want only b", st.Parents)
		}
		if c := findCondition(st.Parents[0].Conditions, "Accepted"); !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("b's Accepted kept its time %v, got %v", t0, c.LastTransitionTime)
		}
	})
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

func TestConditionSourceRefProblems(t *testing.T) {
	cmVol := &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-docs"}}
	pvcVol := &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki"}}
	tests := []struct {
		name   string
		src    *v1alpha1.ContextSource
		lookup sourceLookup
		want   []sourceRefProblem
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
			want: []sourceRefProblem{{ReasonSecretNotFound, `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "api" not found`}},
		},
		{
			name: "header key missing; plain headers ignored; index names the header",
			src: httpSource(
				v1alpha1.HTTPHeader{Name: "Accept", Value: new("application/json")},
				secretHeader("X-Key", "api", "key"),
				secretHeader("X-Org", "api", "org")),
			lookup: sourceLookup{secrets: map[string][]string{"api": {"org", "token"}}},
			want:   []sourceRefProblem{{ReasonSecretNotFound, `spec.httpAPI.headers[1].valueFrom.secretKeyRef: Secret "api" has no key "key"`}},
		},
		{
			name:   "git auth secret with a token",
			src:    gitSource("https://git.example.com/docs.git", "git-creds"),
			lookup: sourceLookup{secrets: map[string][]string{"git-creds": {"token"}}},
		},
		{
			name: "git auth secret missing",
			src:  gitSource("https://git.example.com/docs.git", "git-creds"),
			want: []sourceRefProblem{{ReasonSecretNotFound, `spec.gitRepo.auth.secretRef: Secret "git-creds" not found`}},
		},
		{
			name:   "git auth secret without any credential key",
			src:    gitSource("https://git.example.com/docs.git", "git-creds"),
			lookup: sourceLookup{secrets: map[string][]string{"git-creds": {"known_hosts", "user"}}},
			want: []sourceRefProblem{{ReasonSecretNotFound,
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
			want: []sourceRefProblem{{ReasonConfigMapNotFound, `spec.directory.volume.configMap: ConfigMap "hr-docs" not found`}},
		},
		{
			name:   "a configmap found under another name does not count",
			src:    dirSource("", cmVol),
			lookup: sourceLookup{configMaps: map[string]bool{"other": true}},
			want:   []sourceRefProblem{{ReasonConfigMapNotFound, `spec.directory.volume.configMap: ConfigMap "hr-docs" not found`}},
		},
		{
			name: "claim missing",
			src:  dirSource("/data", pvcVol),
			want: []sourceRefProblem{{ReasonPersistentVolumeClaimNotFound,
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
			want: []sourceRefProblem{
				{ReasonSecretNotFound, `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "api" not found`},
				{ReasonSecretNotFound, `spec.httpAPI.headers[1].valueFrom.secretKeyRef: Secret "api" not found`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sourceRefProblems(tt.src, tt.lookup)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestConditionSourceSpecError(t *testing.T) {
	tests := []struct {
		name    string
		src     func() *v1alpha1.ContextSource
		wantErr []string // substrings; none means valid
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
			wantErr: []string{"spec.directory", "spec.inline"},
		},
		{
			name: "invalid include glob (validation)",
			src: func() *v1alpha1.ContextSource {
				s := dirSource("/srv", nil)
				s.Spec.Directory.Include = []string{"docs/[a"}
				return s
			},
			wantErr: []string{"spec.directory.include"},
		},
		{
			name: "GET with a body (source factory)",
			src: func() *v1alpha1.ContextSource {
				s := httpSource()
				s.Spec.HTTPAPI.Body = `{"q": {{query}}}`
				return s
			},
			wantErr: []string{"spec.httpAPI.body"},
		},
		{
			name: "negative max file size",
			src: func() *v1alpha1.ContextSource {
				s := dirSource("/srv", nil)
				q := resource.MustParse("-1")
				s.Spec.Directory.MaxFileSize = &q
				return s
			},
			wantErr: []string{"spec.directory.maxFileSize"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src()
			orig := src.DeepCopy()
			err := sourceSpecError(src)
			if !reflect.DeepEqual(src, orig) {
				t.Errorf("sourceSpecError modified its argument")
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one mentioning %q", tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
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
			st := sourceStatus(tt.src, sourceSpecError(tt.src), nil, metav1.Now())
			ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonInvalidSpec {
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
	tests := []struct {
		name     string
		specErr  error
		problems []sourceRefProblem
		want     metav1.Condition
	}{
		{name: "valid", want: cond("Ready", condTrue, ReasonValid, 4, "Spec is valid and every referenced object exists")},
		{
			name:     "spec error wins over missing objects",
			specErr:  errors.New("spec.httpAPI.body: a GET request has no body"),
			problems: []sourceRefProblem{{ReasonSecretNotFound, "x"}},
			want:     cond("Ready", condFalse, ReasonInvalidSpec, 4, "spec.httpAPI.body: a GET request has no body"),
		},
		{
			name:     "first problem's reason, every message",
			problems: []sourceRefProblem{{ReasonSecretNotFound, "no secret"}, {ReasonConfigMapNotFound, "no map"}},
			want:     cond("Ready", condFalse, ReasonSecretNotFound, 4, "no secret; no map"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sourceReady(4, tt.specErr, tt.problems); !reflect.DeepEqual(got, tt.want) {
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
	src.Status = sourceStatus(src, nil, missing, t0)
	want := v1alpha1.ContextSourceStatus{ObservedGeneration: 4, Conditions: []metav1.Condition{{
		Type: "Ready", Status: condFalse, Reason: ReasonSecretNotFound, ObservedGeneration: 4, LastTransitionTime: t0,
		Message: `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "api" not found`,
	}}}
	if !reflect.DeepEqual(src.Status, want) {
		t.Fatalf("got %+v\nwant %+v", src.Status, want)
	}
	if again := sourceStatus(src, nil, missing, t1); !reflect.DeepEqual(again, src.Status) {
		t.Errorf("unchanged facts changed the status: %+v", again)
	}
	found := sourceRefProblems(src, sourceLookup{secrets: map[string][]string{"api": {"token"}}})
	st := sourceStatus(src, nil, found, t1)
	if c := st.Conditions[0]; c.Status != condTrue || c.Reason != ReasonValid || !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("after the secret appeared: %+v", c)
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
				cond("ResolvedRefs", condTrue, ReasonResolvedRefs, 5, "All referenced ContextSources exist"),
				cond("Ready", condTrue, ReasonValid, 5, "Spec is valid"),
			},
		},
		{
			name:    "a missing source leaves the permission Ready",
			missing: []string{"payroll"},
			want: []metav1.Condition{
				cond("ResolvedRefs", condFalse, ReasonSourceNotFound, 5, `ContextSource "payroll" not found`),
				cond("Ready", condTrue, ReasonValid, 5, "Spec is valid"),
			},
		},
		{
			name:   "an invalid spec is not Ready",
			mutate: func(p *v1alpha1.AgentPermission) { p.Spec.DenyPaths = []string{"secret/[x"} },
			want: []metav1.Condition{
				cond("ResolvedRefs", condTrue, ReasonResolvedRefs, 5, "All referenced ContextSources exist"),
				cond("Ready", condFalse, ReasonInvalidSpec, 5, ""), // message checked below
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
