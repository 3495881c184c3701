// Package deploy holds no code: it is the module of the deployment tests (render_test.go,
// image_test.go, compose_test.go), kept apart from the gateway's go.mod so that Helm, the
// Kubernetes API types, go-containerregistry and compose-go are never dependencies of the
// gateway itself.
package deploy
