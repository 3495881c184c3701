// Command testplugin serves package testplugin's plugin, for the gateway's
// and the end-to-end tests.
package main

import (
	"github.com/manifold-mcp/manifold/plugins/internal/testplugin"
	"github.com/manifold-mcp/manifold/plugins/sdk"
)

func main() { sdk.Serve(testplugin.New()) }
