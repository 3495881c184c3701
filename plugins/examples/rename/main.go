// Command rename is an example Manifold hook plugin built with the SDK: its
// list_post hook renames tools and prompts as its config says, and the
// gateway makes each new name callable (an alias of the old one).
//
//	go build -o rename ./plugins/examples/rename
//	sha256sum rename
//
//	plugins:
//	  - name: rename
//	    command: [/path/to/rename]
//	    sha256: "<the sum>"
//	    config: { renames: { everything__echo: say } }
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/plugins/sdk"
)

// config is the plugin's `config:`.
type config struct {
	// Renames maps a listed name to the name to list it under.
	Renames map[string]string `json:"renames"`
}

func main() {
	var cfg atomic.Pointer[config]
	cfg.Store(&config{})
	sdk.Serve(&sdk.Plugin{
		Configure: func(_ context.Context, raw json.RawMessage) error {
			c := &config{}
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, c); err != nil {
					return fmt.Errorf("rename: config: %w", err)
				}
			}
			cfg.Store(c)
			return nil
		},
		ListPost: func(_ context.Context, _ *sdk.Context, items []sdk.Item) ([]sdk.Item, error) {
			renames := cfg.Load().Renames
			for i := range items {
				if to, ok := renames[items[i].Name]; ok {
					items[i].Name = to
				}
			}
			return items, nil
		},
	})
}
