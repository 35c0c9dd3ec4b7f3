package webhook

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

// These tests go through the real API server, with the webhook
// configurations generated from this package's markers installed.

func inNS(obj client.Object, ns string) client.Object {
	obj.SetNamespace(ns)
	return obj
}

// deniedBy asserts that err is the API server's report of the named webhook
// refusing an object as Invalid, with details kubectl prints.
func deniedBy(t *testing.T, err error, webhook, kind, name string, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want refused by %s, got created", webhook)
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid status, got %T %v", err, err)
	}
	msg := se.ErrStatus.Message
	if want := `admission webhook "` + webhook + `" denied the request`; !strings.Contains(msg, want) {
		t.Errorf("message %q does not say %q", msg, want)
	}
	if d := se.ErrStatus.Details; d == nil || d.Kind != kind || d.Name != name || d.Group != v1alpha1.GroupVersion.Group {
		t.Errorf("details %+v, want kind %s name %s", d, kind, name)
	}
	for _, c := range contains {
		if !strings.Contains(msg, c) {
			t.Errorf("message %q does not contain %q", msg, c)
		}
	}
}

func TestAdmission(t *testing.T) {
	env := servingWebhooks(t)
	c, warnings := warningClient(t, env)
	ctx := t.Context()

	t.Run("invalid CEL is refused with the CEL message", func(t *testing.T) {
		ns := env.Namespace(t)
		err := c.Create(ctx, inNS(testRoute(`text.startsWith(1)`, "faq"), ns))
		deniedBy(t, err, "vcontextroute.contextrouter.dev", "ContextRoute", "r",
			`spec.when: Invalid value: "text.startsWith(1)"`,
			"found no matching overload for 'startsWith' applied to 'string.(int)'")
		var got v1alpha1.ContextRoute
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r"}, &got); !apierrors.IsNotFound(err) {
			t.Errorf("the refused route exists: %v", err)
		}
	})

	t.Run("missing source is created with a warning", func(t *testing.T) {
		ns := env.Namespace(t)
		warnings.take()
		if err := c.Create(ctx, inNS(testRoute(`"leave" in tags`, "handbook"), ns)); err != nil {
			t.Fatalf("a route naming a missing source must be created: %v", err)
		}
		want := `spec.sources[0].name: ContextSource "handbook" not found in namespace "` + ns + `"; the route is left out of its routers until it exists`
		if got := warnings.take(); len(got) != 1 || got[0] != want {
			t.Errorf("warnings %q, want [%q]", got, want)
		}
	})

	// As `kubectl apply -f dir/` does: the references are created a moment
	// before the objects naming them, likely before the webhook's cache
	// has seen them.
	t.Run("valid objects applied together: accepted, no warnings", func(t *testing.T) {
		ns := env.Namespace(t)
		warnings.take()
		router := inNS(&v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "main"}}, ns)
		source := inNS(inlineSource("faq"), ns)
		route := withParents(testRoute(`containsAnyWord(text, ["vacation"])`, "faq"), "main")
		perm := &v1alpha1.AgentPermission{ObjectMeta: metav1.ObjectMeta{Name: "hr"}, Spec: v1alpha1.AgentPermissionSpec{
			ParentRefs: []v1alpha1.ParentReference{{Name: "main"}}, Agents: []string{"hr-assistant"}, AllowSources: []string{"faq"},
		}}
		for _, obj := range []client.Object{router, source, inNS(route, ns), inNS(perm, ns)} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("create %s: %v", obj.GetName(), err)
			}
		}
		if got := warnings.take(); len(got) != 0 {
			t.Errorf("warnings %q, want none", got)
		}

		// Updates are checked too; deletes never are.
		route.Spec.When = "agent =="
		deniedBy(t, c.Update(ctx, route), "vcontextroute.contextrouter.dev", "ContextRoute", "r", "Syntax error")
		if err := c.Delete(ctx, route); err != nil {
			t.Errorf("delete: %v", err)
		}
	})

	t.Run("permission naming missing sources is created with warnings", func(t *testing.T) {
		ns := env.Namespace(t)
		warnings.take()
		perm := &v1alpha1.AgentPermission{ObjectMeta: metav1.ObjectMeta{Name: "hr"}, Spec: v1alpha1.AgentPermissionSpec{
			Agents: []string{"*"}, DenySources: []string{"salaries"},
		}}
		if err := c.Create(ctx, inNS(perm, ns)); err != nil {
			t.Fatalf("create: %v", err)
		}
		want := `spec.denySources[0]: ContextSource "salaries" not found in namespace "` + ns + `"; the entry takes effect once it exists`
		if got := warnings.take(); len(got) != 1 || got[0] != want {
			t.Errorf("warnings %q, want [%q]", got, want)
		}
	})

	t.Run("router naming a missing Redis password Secret is created with a warning", func(t *testing.T) {
		ns := env.Namespace(t)
		warnings.take()
		r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns}, Spec: v1alpha1.ContextRouterSpec{
			Sessions: v1alpha1.SessionsSpec{Store: v1alpha1.SessionStoreRedis, Redis: &v1alpha1.RedisSpec{Address: "valkey:6379",
				PasswordSecretRef: &v1alpha1.SecretKeySelector{Name: "sessions-redis", Key: "password"}}}}}
		if err := c.Create(ctx, r); err != nil {
			t.Fatalf("create: %v", err)
		}
		want := `spec.sessions.redis.passwordSecretRef.name: Secret "sessions-redis" not found in namespace "` + ns + `"; the router reports Ready=False until it exists`
		if got := warnings.take(); len(got) != 1 || got[0] != want {
			t.Errorf("warnings %q, want [%q]", got, want)
		}
		// Once the Secret exists (created a moment ago: the live read confirms it), no warning.
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sessions-redis", Namespace: ns},
			StringData: map[string]string{"password": "pw"}}); err != nil {
			t.Fatal(err)
		}
		r.Spec.Sessions.TTL = &metav1.Duration{Duration: time.Hour}
		if err := c.Update(ctx, r); err != nil {
			t.Fatalf("update: %v", err)
		}
		if got := warnings.take(); len(got) != 0 {
			t.Errorf("warnings %q, want none", got)
		}
	})

	t.Run("router with dense ranking is admitted without calling its endpoint", func(t *testing.T) {
		ns := env.Namespace(t)
		r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "main"}, Spec: v1alpha1.ContextRouterSpec{
			Ranking: v1alpha1.RankingSpec{Strategy: v1alpha1.RankingHybrid, Embedding: &v1alpha1.EmbeddingSpec{
				Endpoint: "https://embed.example.com/v1/embeddings", Model: "small",
			}, Rerank: &v1alpha1.RerankSpec{Endpoint: "https://rerank.example.com/rerank", Format: v1alpha1.RerankTEI}},
		}}
		if err := c.Create(ctx, inNS(r, ns)); err != nil {
			t.Fatalf("create: %v", err)
		}
		if r.Spec.Ranking.Embedding.BatchSize != 64 || r.Spec.Ranking.Rerank.TopN != 20 {
			t.Errorf("defaults: batchSize %d, topN %d; want 64 and 20", r.Spec.Ranking.Embedding.BatchSize, r.Spec.Ranking.Rerank.TopN)
		}
	})

	t.Run("source the factory refuses is refused", func(t *testing.T) {
		ns := env.Namespace(t)
		deniedBy(t, c.Create(ctx, inNS(httpSource(v1alpha1.HTTPMethodPost, `{"q": {{query}}`), ns)),
			"vcontextsource.contextrouter.dev", "ContextSource", "search",
			"spec.httpAPI.body: Invalid value: not valid JSON once {{query}} is replaced by a JSON string")
	})

	// followRedirects: the API server defaults the policy and enforces the
	// schema's rule; the webhook checks the hosts and quotes them redacted.
	t.Run("followRedirects", func(t *testing.T) {
		ns := env.Namespace(t)
		src := inNS(httpSource(v1alpha1.HTTPMethodGet, ""), ns).(*v1alpha1.ContextSource)
		if err := c.Create(ctx, src); err != nil {
			t.Fatalf("create: %v", err)
		}
		var got v1alpha1.ContextSource
		if err := c.Get(ctx, client.ObjectKeyFromObject(src), &got); err != nil {
			t.Fatal(err)
		}
		if p := got.Spec.HTTPAPI.FollowRedirects.Policy; p != v1alpha1.RedirectSameHost {
			t.Errorf("followRedirects.policy defaulted to %q, want SameHost", p)
		}

		noHosts := inNS(httpSource(v1alpha1.HTTPMethodGet, ""), ns).(*v1alpha1.ContextSource)
		noHosts.Name = "no-hosts"
		noHosts.Spec.HTTPAPI.FollowRedirects.Policy = v1alpha1.RedirectAllowedHosts
		err := c.Create(ctx, noHosts)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "allowedHosts must be set exactly when policy is AllowedHosts") {
			t.Errorf("AllowedHosts without hosts: err = %v, want the schema's rule", err)
		}

		badHost := inNS(httpSource(v1alpha1.HTTPMethodGet, ""), ns).(*v1alpha1.ContextSource)
		badHost.Name = "bad-host"
		badHost.Spec.HTTPAPI.FollowRedirects = v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts,
			AllowedHosts: []string{"ghp_Tok3nValue@kb-eu.example.com"}}
		err = c.Create(ctx, badHost)
		deniedBy(t, err, "vcontextsource.contextrouter.dev", "ContextSource", "bad-host",
			`spec.httpAPI.followRedirects.allowedHosts[0]: Invalid value: "***@kb-eu.example.com"`)
		if err != nil && strings.Contains(err.Error(), "Tok3nValue") {
			t.Errorf("the denial shows the user part: %v", err)
		}
	})
}

// TestKubectlApply checks what a user sees: kubectl's own rendering of the
// refusal, and the warning printed on success.
func TestKubectlApply(t *testing.T) {
	env := servingWebhooks(t)
	ns := env.Namespace(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func(manifest string) (stdout, stderr string, err error) {
		path := filepath.Join(dir, "m.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.BinDir(), "kubectl"),
			"--kubeconfig", kubeconfig, "-n", ns, "apply", "-f", path)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.String(), errOut.String(), err
	}

	_, stderr, err := apply(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata:
  name: vacation
spec:
  when: 'text.contains("vacation") && agnt == "hr"'
  sources:
  - name: handbook
`)
	if err == nil {
		t.Fatal("kubectl apply of a broken condition succeeded")
	}
	for _, want := range []string{
		`The ContextRoute "vacation" is invalid: spec.when: Invalid value: "text.contains(\"vacation\") && agnt == \"hr\""`,
		"undeclared reference to 'agnt'",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("kubectl stderr\n%s\ndoes not contain\n%s", stderr, want)
		}
	}

	stdout, stderr, err := apply(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata:
  name: vacation
spec:
  when: 'text.contains("vacation") && agent == "hr"'
  sources:
  - name: handbook
`)
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "contextroute.contextrouter.dev/vacation created") {
		t.Errorf("stdout %q", stdout)
	}
	if want := `Warning: spec.sources[0].name: ContextSource "handbook" not found in namespace "` + ns + `"`; !strings.Contains(stderr, want) {
		t.Errorf("kubectl stderr\n%s\ndoes not contain\n%s", stderr, want)
	}
}

// laggingCache is a cache that has not seen anything yet.
type laggingCache struct{}

func (laggingCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("").GroupResource(), "")
}

func (laggingCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestReferenceLookupConfirmsCacheMisses(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	for _, obj := range []client.Object{
		inNS(&v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "main"}}, ns),
		inNS(inlineSource("faq"), ns),
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	routers, srcs := []string{"main", "ghost"}, []string{"faq", "handbook"}

	got := refReaders{cached: laggingCache{}, live: env.Client}.lookup(ctx, ns, routers, srcs)
	want := refs{namespace: ns, routers: map[string]bool{"main": true, "ghost": false}, sources: map[string]bool{"faq": true, "handbook": false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with live confirmation: %+v, want %+v", got, want)
	}

	// Without a live reader the cache is trusted.
	got = refReaders{cached: laggingCache{}}.lookup(ctx, ns, routers, srcs)
	if got.routers["main"] || got.sources["faq"] {
		t.Errorf("without live confirmation the lagging cache decides: %+v", got)
	}

	// Nothing named, nothing looked up: no warnings possible.
	if got := (refReaders{cached: env.Client}).lookup(ctx, ns, nil, nil); got.routers != nil || got.sources != nil {
		t.Errorf("empty lookup: %+v", got)
	}
}
