// Package guard is the engine of the built-in `guard` plugin: it blocks
// tool calls whose arguments match its rules (a regular expression, a
// glob, or a preset for path traversal, shell metacharacters and URLs
// outside an allow-list), per tool and argument path, with the rule's
// message as the error the client sees. The plugin host (package plugins)
// calls Check from the tool_pre_call hook (docs/architecture.md, plugins).
package guard
