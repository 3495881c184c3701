package upstream

// Log field keys of this package.
const (
	keyLine       = "line"
	keyRetryIn    = "retry_in"
	keyProtocol   = "protocol_version"
	keyTools      = "tools"
	keyPrompts    = "prompts"
	keyResources  = "resources"
	keyTemplates  = "templates"
	keyURI        = "uri"
	keyLimit      = "limit"
	keyHTTPMethod = "http_method"
	keyMethod     = "method"
)
