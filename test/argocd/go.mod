// Separate module so that gopher-lua, the Lua VM Argo CD runs health checks
// in, stays out of the operator's dependencies.
module github.com/contextrouter/contextrouter/test/argocd

go 1.26.0

require (
	github.com/yuin/gopher-lua v1.1.2
	sigs.k8s.io/yaml v1.6.0
)

require go.yaml.in/yaml/v2 v2.4.2 // indirect
