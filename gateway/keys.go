package gateway

// Log field keys of this package.
const (
	keySession = "session"
	keyServer  = "server"
	keyPID     = "pid"
	keyState   = "state"
	keyError   = "error"
	keyReason  = "reason"
	keyKind    = "kind"
	keyName    = "name"
	keyID      = "id"
	keyPath    = "path" // of a call: "raw" (rawcall.go)
	keyAddr    = "addr"
	keyVersion = "version"
	keyIdle    = "idle"

	keyPrincipal = "principal"
	keyGroups    = "groups"
	keyRule      = "rule"

	keyTrigger = "trigger"
	keyHash    = "hash"
	keyKey     = "key"
	keyStack   = "stack"

	keyPinFile = "pinFile" // pinning.go
	keyOutcome = "outcome"
)
