package packaging_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/internal/testenv"
)

// The rendered chart is what `helm install` sends; a real API server (the
// test control plane, with the chart's own CRDs installed) must accept every
// object with strict field validation. Dry-run keeps the cluster empty, so
// the variants do not see each other's cluster-scoped objects.
func TestChartPassesServerSideDryRun(t *testing.T) {
	env := testenv.Start(t, testenv.WithCRDs(chartDir+"/crds"))
	ctx := context.Background()

	variants := []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"cert-manager without injection", []string{"--set", "certManager.enabled=true,injection.enabled=false"}},
		{"everything set", []string{
			"--set", "image.repository=localhost/contextrouter,image.tag=dev,image.pullPolicy=Never,replicas=2",
			"--set", "webhook.failurePolicy=Ignore,injection.failurePolicy=Fail,metrics.secure=false",
			"--set-json", `watchNamespaces=["team-a"]`,
			"--set-json", `injection.namespaceSelector={"matchLabels":{"contextrouter.dev/injection":"enabled"}}`,
			"--set-json", `tolerations=[{"key":"infra","operator":"Exists","effect":"NoSchedule"}]`,
			"--set-json", `imagePullSecrets=[{"name":"regcred"}]`,
			"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"ScheduleAnyway","labelSelector":{"matchLabels":{"control-plane":"controller-manager"}}}]`,
		}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ns := env.Namespace(t)
			objs := mustRender(t, ns, v.args...)
			applied := 0
			for _, o := range objs {
				// cert-manager's kinds need cert-manager's CRDs, which the
				// test control plane does not have; TestChartValues checks
				// their content.
				if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
					continue
				}
				if err := env.Client.Create(ctx, o, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
					continue
				}
				applied++
			}
			if applied < 10 {
				t.Errorf("only %d objects were applied: %s", applied, names(objs))
			}
		})
	}
}
