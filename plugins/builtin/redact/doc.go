// Package redact is the engine of the built-in `redact` plugin: it finds
// secrets and personal data in the JSON of tool results, prompt messages,
// resource contents and (when asked) tool arguments, and replaces each
// finding with `[REDACTED:<kind>]`. The plugin host (package plugins) calls
// it from the tool_post_call, prompt_post_get and resource_post_read hooks,
// and from tool_pre_call when `arguments` is on; it records the Counts in
// the audit record, never the values (docs/architecture.md, plugins).
package redact
