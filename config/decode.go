package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// decoder turns the parsed document (maps, lists and scalars) into typed values, expanding
// ${VAR} references in the string values it reads and collecting every problem with its key.
// One decoder serves one Parse call.
type decoder struct {
	source string
	lookup func(string) (string, bool)
	log    *zap.Logger
	errs   []*FieldError
	// failed holds the keys whose value could not be decoded, so that validation does not
	// report a second, derived problem for them.
	failed map[string]bool
	// origins maps keys filled in from standard environment variables (the OTLP endpoint and
	// protocol) to the variable, so that validation blames the variable.
	origins map[string]string
}

func (d *decoder) fail(key, msg string) {
	if name, ok := d.origins[key]; ok { // an environment override set it: blame the variable
		d.errs = append(d.errs, &FieldError{Source: envSource, Key: name, Msg: msg})
	} else {
		d.errs = append(d.errs, &FieldError{Source: d.source, Key: key, Msg: msg})
	}
	if d.failed == nil {
		d.failed = make(map[string]bool)
	}
	d.failed[key] = true
}

// ignore logs a key that is deliberately not used.
func (d *decoder) ignore(key, why string) {
	d.log.Debug("ignoring config key", zap.String(logKeySource, d.source), zap.String(logKeyKey, key), zap.String(logKeyReason, why))
}

// field is one key of a section: where its value goes, or the keys of a nested section.
type field struct {
	name string
	// ptr is the destination: *string, **string, *bool, *int, *int64, **float64,
	// *time.Duration, *[]string or *map[string]string. Nil for a section.
	ptr any
	sub []field
	// each describes the entries of a mapping of names to sections (mcpServers), for
	// environment overrides (envSchema); the decoder has its own code for such mappings.
	each []field
}

// gatewayFields describes the gateway section with destinations in g. It is the single list of
// gateway keys, used for the file and for MANIFOLD_GATEWAY__… overrides alike (envSchema).
func gatewayFields(g *Gateway) []field {
	return []field{
		{name: "listen", ptr: &g.Listen},
		{name: "publicURL", ptr: &g.PublicURL},
		{name: "separator", ptr: &g.Separator},
		{name: "maxToolNameLength", ptr: &g.MaxToolNameLength},
		{name: "insecure", ptr: &g.Insecure},
		{name: "allowedHosts", ptr: &g.AllowedHosts},
		{name: "allowedOrigins", ptr: &g.AllowedOrigins},
		{name: "tls", sub: []field{
			{name: "certFile", ptr: &g.TLS.CertFile},
			{name: "keyFile", ptr: &g.TLS.KeyFile},
		}},
		{name: "limits", sub: []field{
			{name: "maxSessions", ptr: &g.Limits.MaxSessions},
			{name: "maxSessionsPerPrincipal", ptr: &g.Limits.MaxSessionsPerPrincipal},
			{name: "maxMessageBytes", ptr: &g.Limits.MaxMessageBytes},
			{name: "maxConcurrentCalls", ptr: &g.Limits.MaxConcurrentCalls},
			{name: "sessionIdleTimeout", ptr: &g.Limits.SessionIdleTimeout},
		}},
		{name: "timeouts", sub: []field{
			{name: "connect", ptr: &g.Timeouts.Connect},
			{name: "call", ptr: &g.Timeouts.Call},
			{name: "drain", ptr: &g.Timeouts.Drain},
			{name: "requestBody", ptr: &g.Timeouts.RequestBody},
			{name: "idleConnection", ptr: &g.Timeouts.IdleConnection},
		}},
		{name: "backoff", sub: []field{
			{name: "initial", ptr: &g.Backoff.Initial},
			{name: "max", ptr: &g.Backoff.Max},
		}},
		{name: "discovery", sub: discoveryFields(&g.Discovery)},
		{name: "pinning", sub: pinningFields(&g.Pinning)},
		{name: "log", sub: []field{
			{name: "level", ptr: &g.Log.Level},
			{name: "format", ptr: &g.Log.Format},
		}},
		{name: "cluster", sub: clusterFields(&g.Cluster)},
		{name: "tokenStore", sub: tokenStoreFields(&g.TokenStore)},
	}
}

// section decodes map m into fields; key is the section's own key. Unknown keys are errors.
func (d *decoder) section(key string, fields []field, v any) {
	m, ok := asMap(v)
	if !ok {
		if v != nil {
			d.fail(key, "must be a mapping of keys to values")
		}
		return
	}
	for _, k := range sortedKeys(m) {
		sub := joinKey(key, k)
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == k })
		if i < 0 {
			d.fail(sub, unknownKey(k, fieldNames(fields)))
			continue
		}
		if f := fields[i]; f.sub != nil {
			d.section(sub, f.sub, m[k])
		} else {
			d.value(sub, f.ptr, m[k])
		}
	}
}

// value expands the ${VAR} references in v and stores it in ptr.
func (d *decoder) value(key string, ptr, v any) {
	if v, ok := d.expand(key, v); ok {
		d.assign(key, ptr, v)
	}
}

// expand returns v with the references in its strings expanded: v itself, or the elements of
// a list, or the values of a mapping. Problems are reported under the exact key.
func (d *decoder) expand(key string, v any) (any, bool) {
	switch v := v.(type) {
	case envValue: // taken literally: ${VAR} expands in files only
		d.setBy(key, v.Var)
		return v.Value, true
	case string:
		s, msg := expand(v, d.lookup)
		if msg != "" {
			d.fail(key, msg)
			return nil, false
		}
		return s, true
	case []any:
		out, ok := make([]any, len(v)), true
		for i, e := range v {
			var eok bool
			out[i], eok = d.expand(fmt.Sprintf("%s[%d]", key, i), e)
			ok = ok && eok
		}
		return out, ok
	case map[string]any, map[any]any:
		m, _ := asMap(v)
		out, ok := make(map[string]any, len(m)), true
		for _, k := range sortedKeys(m) {
			e, eok := m[k], true
			if _, nested := asMap(e); !nested {
				e, eok = d.expand(joinKey(key, k), e)
			}
			out[k] = e
			ok = ok && eok
		}
		return out, ok
	}
	return v, true
}

// assign converts v (already expanded) to the type ptr points to and stores it. Messages name
// the expected form and never quote the value, which may hold a secret.
func (d *decoder) assign(key string, ptr, v any) {
	switch p := ptr.(type) {
	case *string:
		if s, ok := asString(v); ok {
			*p = s
			return
		}
		d.fail(key, mustBeString)
	case **string: // null leaves the pointer nil: absent and null mean the same
		if v == nil {
			return
		}
		if s, ok := asString(v); ok {
			*p = &s
			return
		}
		d.fail(key, mustBeString)
	case *bool:
		if b, ok := asBool(v); ok {
			*p = b
			return
		}
		d.fail(key, "must be true or false")
	case *int:
		if n, ok := asInt(v); ok && n >= math.MinInt && n <= math.MaxInt {
			*p = int(n)
			return
		}
		d.fail(key, "must be an integer")
	case *int64:
		if n, ok := asInt(v); ok {
			*p = n
			return
		}
		d.fail(key, "must be an integer")
	case **float64: // null leaves the pointer nil, as for **string
		if v == nil {
			return
		}
		if f, ok := asFloat(v); ok {
			*p = &f
			return
		}
		d.fail(key, "must be a number")
	case *time.Duration:
		if s, ok := v.(string); ok {
			if dur, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
				*p = dur
				return
			}
		}
		d.fail(key, `must be a duration with a unit, such as "30s", "500ms" or "2m" (a bare number is ambiguous: Cline means seconds, Gemini CLI milliseconds)`)
	case *[]string:
		d.strings(key, p, v)
	case *map[string]string:
		d.stringMap(key, p, v)
	default:
		panic(fmt.Sprintf("config: no decoder for %T", ptr)) // a programming error in the field tables
	}
}

func (d *decoder) strings(key string, p *[]string, v any) {
	if v == nil {
		*p = nil
		return
	}
	list, ok := v.([]any)
	if !ok {
		d.fail(key, "must be a list of strings")
		return
	}
	if len(list) == 0 {
		*p = nil // [] and absent mean the same
		return
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := asString(e)
		if !ok {
			d.fail(fmt.Sprintf("%s[%d]", key, i), mustBeString)
			continue
		}
		out = append(out, s)
	}
	*p = out
}

func (d *decoder) stringMap(key string, p *map[string]string, v any) {
	if v == nil {
		*p = nil
		return
	}
	m, ok := asMap(v)
	if !ok {
		d.fail(key, "must be a mapping of names to strings")
		return
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := asString(e)
		if !ok {
			d.fail(joinKey(key, k), mustBeString)
			continue
		}
		out[k] = s
	}
	*p = out
}

const mustBeString = "must be a string (in YAML, quote numbers and booleans)"

// asMap returns v as a mapping with string keys. YAML mappings with non-string keys (such as
// 1: x) get their keys formatted.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[fmt.Sprint(k)] = e
		}
		return out, true
	}
	return nil, false
}

// asString accepts strings, and null as the empty string. Numbers and booleans are refused
// rather than converted: YAML has already turned 0755 into 493 and 1.10 into 1.1.
func asString(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	}
	return "", false
}

// asBool accepts booleans and the strings strconv.ParseBool accepts (from ${VAR} or the
// environment).
func asBool(v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		return b, err == nil
	}
	return false, false
}

// asInt accepts integers, integral floats (JSON numbers) and decimal strings.
func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		return int64(v), v <= math.MaxInt64
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// asFloat accepts finite numbers and decimal strings (from ${VAR}).
func asFloat(v any) (float64, bool) {
	var f float64
	switch v := v.(type) {
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case uint64:
		f = float64(v)
	case float64:
		f = v
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// joinKey appends k to the dotted key parent, quoting k unless it is a plain name, so that
// a server named "github.com" reads mcpServers."github.com".url.
func joinKey(parent, k string) string {
	if !isName(k) {
		k = strconv.Quote(k)
	}
	if parent == "" {
		return k
	}
	return parent + "." + k
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func fieldNames(fields []field) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return names
}

// unknownKey is the message for key k that is not one of known, with a suggestion when k is
// close to a known key.
func unknownKey(k string, known []string) string {
	best, bestDist := "", 3
	for _, name := range known {
		if strings.EqualFold(k, name) {
			best = name
			break
		}
		if dist := editDistance(strings.ToLower(k), strings.ToLower(name)); dist < bestDist && len(name) > 3 {
			best, bestDist = name, dist
		}
	}
	if best == "" {
		return "unknown key"
	}
	return fmt.Sprintf("unknown key (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
