package audit

import (
	"encoding/json"
	"math"
	"time"
)

// Values of Record.Decision.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Values of Record.Outcome.
const (
	// OutcomeOK is a result without isError.
	OutcomeOK = "ok"
	// OutcomeToolError is a tools/call result with isError: true.
	OutcomeToolError = "tool_error"
	// OutcomeError is a JSON-RPC error response; Record.ErrorCode holds its code. A denial
	// is an error too: the one the client saw, usually that of an unknown name.
	OutcomeError = "error"
)

// Record is one audit record: one tools/call, prompts/get or resources/read as the client
// made it, or its denial. A call that took several MRTR rounds is one record, written when
// the call ends, with Rounds counting them. The JSON form is one line with the keys given by
// the field tags, plus "duration_ms" and, depending on the arguments mode, "arguments".
type Record struct {
	// Time is when the request arrived; Write fills in the current time when it is zero.
	// Written in UTC, RFC 3339 with nanoseconds.
	Time time.Time `json:"time"`
	// Duration is how long the request took, until the response was sent; written as
	// "duration_ms", milliseconds with three decimals.
	Duration time.Duration `json:"-"`
	// Method is the MCP method: "tools/call", "prompts/get" or "resources/read".
	Method string `json:"method"`
	// SessionID is the downstream session id (Mcp-Session-Id); empty for stdio and sessionless
	// requests.
	SessionID string `json:"session_id,omitempty"`
	// Principal is the name of the authenticated caller (auth.local for stdio and for HTTP
	// while auth is off).
	Principal string `json:"principal"`
	// Groups are the principal's groups.
	Groups []string `json:"groups,omitempty"`
	// ClientName and ClientVersion are the clientInfo the downstream client sent at initialize.
	ClientName    string `json:"client_name,omitempty"`
	ClientVersion string `json:"client_version,omitempty"`
	// ProtocolVersion is the MCP protocol version of the downstream session or request.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Server is the name of the upstream server (its mcpServers key); empty when the name
	// reached no server, such as a call to a name that does not exist.
	Server string `json:"server,omitempty"`
	// Name is the tool or prompt name, or the resource URI, as the client sent it
	// (namespaced).
	Name string `json:"name"`
	// UpstreamName is the same as the upstream server knows it; empty when no server.
	UpstreamName string `json:"upstream_name,omitempty"`
	// Decision is DecisionAllow or DecisionDeny, the policy's answer.
	Decision string `json:"decision"`
	// Rule names the policy rule that decided: its name, or its position such as
	// "policy.rules[2]"; empty for the policy default or without a policy.
	Rule string `json:"rule,omitempty"`
	// Outcome is OutcomeOK, OutcomeToolError or OutcomeError.
	Outcome string `json:"outcome"`
	// ErrorCode is the JSON-RPC error code when Outcome is OutcomeError.
	ErrorCode int64 `json:"error_code,omitempty"`
	// ResultBytes is the size of the result sent to the client, in bytes of JSON; 0 for an
	// error.
	ResultBytes int64 `json:"result_bytes"`
	// Rounds is the number of MRTR rounds the call took (1 for a plain call); 0 is left out.
	Rounds int `json:"rounds,omitempty"`
	// Event is set on records that are not a call: "definition_changed" (an upstream serves
	// a tool or prompt definition other than the approved one) or "definition_held" (a new
	// one waits for approval); Method is then the list it came in (tools/list, prompts/list),
	// Rule "pinning", Outcome "served" or "held", and DefinitionHash and ApprovedHash the
	// hashes of the definition served and of the approved one.
	Event          string `json:"event,omitempty"`
	DefinitionHash string `json:"definition_hash,omitempty"`
	ApprovedHash   string `json:"approved_hash,omitempty"`
	// RateLimit names the rate limit that refused the call ("rateLimits[0]"); empty when
	// none did.
	RateLimit string `json:"rate_limit,omitempty"`
	// TraceID and SpanID identify the request's server span (hex), when traced or when the
	// client sent a trace context.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Arguments are the call's arguments as received: a json.RawMessage or []byte of JSON, or
	// any value encoding/json can marshal (such as the map[string]string of prompts/get). The
	// Log records them as the config says: see config.Audit.Arguments. Nil: none.
	Arguments any `json:"-"`
	// Plugins are the hook plugins' decisions on the call (plugins.Decision values), when
	// some plugin covers it: what each did, its rule and counts, never the values it found.
	Plugins any `json:"plugins,omitempty"`
}

// line is the JSON form of a Record.
type line struct {
	// Time shadows Record.Time, to write it in UTC.
	Time       time.Time `json:"time"`
	DurationMS float64   `json:"duration_ms"`
	*Record
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	ArgumentsError string          `json:"arguments_error,omitempty"`
}

// millis converts d to milliseconds rounded to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}
