package server

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
)

// Bounds of what the router writes into the cluster about held-back tools.
const (
	// maxToolEvents bounds the Events one source gets per snapshot: one per
	// newly held-back tool, the rest summed up in one more.
	maxToolEvents = 10
	// toolStatusRetry is how long a failed status write waits to be tried again.
	toolStatusRetry = 10 * time.Second
	// ReasonToolPendingApproval is the reason of the Event of a tool held back.
	ReasonToolPendingApproval = "ToolPendingApproval"
)

// toolReporter writes what the router makes of its Tools and MCP sources
// into the cluster (serve --report-tools-status, api.md §10.9): the
// router's entry of each source's status.tools, by server-side apply under
// a field manager of its own (the router's replicas write the same entry),
// and an Event per tool newly held back. Builds queue work; one goroutine
// writes, so that a slow API server never holds a reload up.
type toolReporter struct {
	kube func() (*rest.Config, error)
	log  *slog.Logger

	mu sync.Mutex
	// latest is the last snapshot's statuses (they replace older ones);
	// fresh the held-back tools not yet announced, bounded per source.
	latest *toolReport
	fresh  []toolEvent
	wake   chan struct{}

	// Set on first use, by the writing goroutine only; instance is the
	// Events' reportingInstance (the pod's name).
	c        client.Client
	instance string
	// written holds the last entry written per source, to skip equal writes.
	written map[string]v1alpha1.SourceToolsStatus
}

type toolReport struct {
	router  string
	entries map[client.ObjectKey]v1alpha1.SourceToolsStatus
}

type toolEvent struct {
	source client.ObjectKey
	note   string
}

func newToolReporter(kube func() (*rest.Config, error), log *slog.Logger) *toolReporter {
	return &toolReporter{kube: kube, log: log, wake: make(chan struct{}, 1), written: map[string]v1alpha1.SourceToolsStatus{}}
}

// enqueue queues the statuses of a new snapshot's tool sources and the
// Events of the tools it newly holds back. A nil reporter does nothing.
func (r *toolReporter) enqueue(st *state, fresh []sourcePending) {
	if r == nil {
		return
	}
	rt := st.cfg.Router
	namespaces := map[string]string{}
	for _, src := range st.cfg.Sources {
		namespaces[src.Name] = src.Namespace
	}
	key := func(name string) client.ObjectKey {
		ns := namespaces[name]
		if ns == "" {
			ns = rt.Namespace
		}
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return client.ObjectKey{Namespace: ns, Name: name}
	}
	report := &toolReport{router: rt.Name, entries: map[client.ObjectKey]v1alpha1.SourceToolsStatus{}}
	for _, src := range st.snap.Sources() {
		if src.Approval == "" {
			continue
		}
		e := v1alpha1.SourceToolsStatus{Router: rt.Name, Approval: src.Approval, Digest: src.ToolsDigest, Tools: int32(src.Tools)}
		if src.Approval == v1alpha1.ToolApprovalManual {
			e.PendingTools = int32(len(src.Pending))
			e.Pending = src.Pending[:min(len(src.Pending), maxStatusPending)]
		}
		report.entries[key(src.Name)] = e
	}
	var evs []toolEvent
	for _, sp := range fresh {
		for i, p := range sp.fresh {
			if i == maxToolEvents-1 && len(sp.fresh) > maxToolEvents {
				evs = append(evs, toolEvent{key(sp.source), fmt.Sprintf("%d more tools held back pending approval; the source's status lists them", len(sp.fresh)-i)})
				break
			}
			evs = append(evs, toolEvent{key(sp.source), fmt.Sprintf("Tool %s held back pending approval: not served until %s holds digest %s",
				describePending(p), v1alpha1.AnnotationApprovedTools, p.Digest)})
		}
	}
	r.mu.Lock()
	r.latest = report
	r.fresh = append(r.fresh, evs...)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run writes queued work until ctx ends.
func (r *toolReporter) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		report, evs := r.latest, r.fresh
		r.latest, r.fresh = nil, nil
		r.mu.Unlock()
		if err := r.write(ctx, report, evs); err != nil {
			r.log.Warn("tool sources' status not written to the cluster; retrying", "error", err, "retry", toolStatusRetry)
			r.mu.Lock()
			if r.latest == nil {
				r.latest = report
			}
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(toolStatusRetry):
			}
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// connect makes the client and the Event recorder on first use.
func (r *toolReporter) connect(ctx context.Context) error {
	if r.c != nil {
		return nil
	}
	cfg, err := r.kube()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := eventsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	r.c = c
	r.instance, _ = os.Hostname()
	return nil
}

// write applies the router's status entries that changed, then records the
// Events (a source the cluster does not hold gets none).
func (r *toolReporter) write(ctx context.Context, report *toolReport, evs []toolEvent) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	if report != nil {
		for key, e := range report.entries {
			if w, ok := r.written[key.String()]; ok && reflect.DeepEqual(w, e) {
				continue
			}
			if err := r.apply(ctx, report.router, key, e); err != nil {
				return err
			}
			r.written[key.String()] = e
		}
	}
	for _, ev := range evs {
		if err := r.event(ctx, ev); err != nil {
			r.log.Warn("no Event for a tool held back", "source", ev.source.String(), "error", err)
		}
	}
	return nil
}

// event records one Event regarding a source (none when the cluster does
// not hold it).
func (r *toolReporter) event(ctx context.Context, ev toolEvent) error {
	src := &v1alpha1.ContextSource{}
	if err := r.c.Get(ctx, ev.source, src); err != nil {
		return client.IgnoreNotFound(err)
	}
	return r.c.Create(ctx, &eventsv1.Event{
		// Named as client-go names Events: the object's name and the time.
		ObjectMeta:          metav1.ObjectMeta{Namespace: src.Namespace, Name: fmt.Sprintf("%.236s.%x", src.Name, time.Now().UnixNano())},
		EventTime:           metav1.NowMicro(),
		ReportingController: "contextrouter.dev/router",
		ReportingInstance:   r.instance,
		Action:              "HoldBack",
		Reason:              ReasonToolPendingApproval,
		Type:                corev1.EventTypeWarning,
		Note:                ev.note,
		Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextSource,
			Namespace: src.Namespace, Name: src.Name, UID: src.UID, ResourceVersion: src.ResourceVersion},
	})
}

// apply writes one entry of status.tools. A source the cluster does not
// hold (a standalone manifest) is no error.
func (r *toolReporter) apply(ctx context.Context, router string, key client.ObjectKey, e v1alpha1.SourceToolsStatus) error {
	entry, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&e)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.KindContextSource,
		"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace},
		"status":   map[string]any{"tools": []any{entry}},
	}}
	err = r.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(toolStatusOwner(router)), client.ForceOwnership)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("%s %s: status.tools: %w", v1alpha1.KindContextSource, key, err)
	}
	return nil
}

// toolStatusOwner is the field manager of a router's status.tools entries:
// one per router, shared by its replicas; at most 128 characters.
func toolStatusOwner(router string) string {
	name := "contextrouter.dev/router/" + router
	if len(name) > 128 {
		sum := digest.SHA256(router)
		name = "contextrouter.dev/router/" + hex.EncodeToString(sum[:16])
	}
	return name
}
