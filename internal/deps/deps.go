// Package deps pins the module's dependencies while the packages that use them are written.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/knadh/koanf/parsers/json"
	_ "github.com/knadh/koanf/parsers/yaml"
	_ "github.com/knadh/koanf/providers/confmap"
	_ "github.com/knadh/koanf/providers/rawbytes"
	_ "github.com/knadh/koanf/v2"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/yosida95/uritemplate/v3"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
)
