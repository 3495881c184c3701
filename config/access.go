package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Policy effects and defaults (Policy.Default, Rule.Effect).
const (
	Allow = "allow"
	Deny  = "deny"
)

// GroupPrefix marks a group in Rule.Principals: "group:dev".
const GroupPrefix = "group:"

// KeyHashPrefix starts an APIKey.KeyHash: "sha256:" and 64 hex digits.
const KeyHashPrefix = "sha256:"

// MinAPIKeyLength is the shortest API key accepted in APIKey.Key.
const MinAPIKeyLength = 16

// Auth is the "auth" section: who may connect over HTTP. With neither API keys nor JWT it is
// off, which is allowed only on a loopback listener (or with gateway.insecure).
type Auth struct {
	// APIKeys (key "apiKeys") are static bearer tokens, each naming a principal.
	APIKeys []APIKey
	// JWT (key "jwt") accepts signed JWT bearer tokens; nil when absent.
	JWT *JWT
	// Resource (key "resource") is this gateway's MCP endpoint as clients reach it, such as
	// "https://mcp.example.com/mcp": the "resource" of the OAuth protected resource metadata and
	// the default JWT audience. Empty: derived from each request's Host.
	Resource string
	// AuthorizationServers (key "authorizationServers") are the OAuth authorization servers
	// (issuer URLs) named in the protected resource metadata. Empty: the JWT issuer, if any.
	AuthorizationServers []string
	// Scopes (key "scopes") are listed as scopes_supported in the metadata.
	Scopes []string
	// Local (key "local") is the principal of stdio sessions and, while auth is off, of every
	// HTTP request. Default name "local", no groups.
	Local Principal
	// Operators (key "operators") lists the principal names and "group:<name>" entries that
	// may use the operator console (/ui), the details of /status and POST /reload while auth
	// is on. Empty: no one may. While auth is off those endpoints answer loopback clients
	// only, and this list is not consulted.
	Operators []string
}

// Enabled reports whether HTTP requests must present a bearer token.
func (a *Auth) Enabled() bool { return len(a.APIKeys) > 0 || a.JWT != nil }

// Principal names a principal and its groups.
type Principal struct {
	Name   string
	Groups []string
}

// APIKey is one static bearer token. Exactly one of Key and KeyHash is set.
type APIKey struct {
	// Name is the principal the key authenticates.
	Name string
	// Key is the token itself (at least MinAPIKeyLength characters), usually "${VAR}". It is
	// hashed when loaded and never logged.
	Key string
	// KeyFile (key "keyFile") names a file holding the key instead (a Kubernetes Secret
	// volume, say); the loader reads it into Key. Set at most one of the two.
	KeyFile string
	// KeyHash (key "keyHash") is "sha256:<hex>" of the token, so the file holds no secret.
	KeyHash string
	// Groups are the principal's groups, for rules naming "group:<name>".
	Groups []string
}

// JWT configures JWT bearer tokens. Exactly one key source is set: JWKSURL, PublicKey,
// PublicKeyFile or Secret.
type JWT struct {
	// Issuer must equal the token's "iss".
	Issuer string
	// Audience lists accepted "aud" values; empty means Auth.Resource. One must match.
	Audience []string
	// JWKSURL (key "jwksURL") is fetched for the signing keys and refreshed; https, or http on
	// loopback only.
	JWKSURL string
	// PublicKey (key "publicKey") is a PEM public key (RSA, ECDSA or Ed25519).
	PublicKey string
	// PublicKeyFile (key "publicKeyFile") names a file holding a PEM public key.
	PublicKeyFile string
	// Secret is an HMAC key (HS256/384/512) of at least 32 bytes, usually "${VAR}".
	Secret string
	// SecretFile (key "secretFile") names a file holding Secret instead; the loader reads it
	// into Secret. Set at most one of the two.
	SecretFile string
	// Algorithms (key "algorithms") restricts the accepted "alg" values; empty means those of
	// the key source. "none" is never accepted.
	Algorithms []string
	// PrincipalClaim (key "principalClaim") is the claim naming the principal; default "sub".
	PrincipalClaim string
	// GroupsClaim (key "groupsClaim") is the claim listing its groups (a list of strings, or
	// one space-separated string); default "groups". Absent in a token: no groups.
	GroupsClaim string
	// Leeway tolerates clock skew on exp, nbf and iat; default 30s.
	Leeway time.Duration
	// OIDC (key "oidc") lets operators sign in to the console with the issuer's OpenID
	// Connect authorization code flow; off while its ClientID is empty.
	OIDC OIDC
}

// OIDC is the console's OpenID Connect client at the JWT issuer.
type OIDC struct {
	// ClientID (key "clientID") is the console's client at the issuer; required to turn the
	// sign-in on.
	ClientID string
	// ClientSecret (key "clientSecret") authenticates a confidential client (HTTP Basic at the
	// token endpoint); empty for a public client, which PKCE protects.
	ClientSecret string
	// ClientSecretFile (key "clientSecretFile") names a file holding ClientSecret instead;
	// the loader reads it into ClientSecret. Set at most one of the two.
	ClientSecretFile string
	// Scopes are requested; default ["openid"].
	Scopes []string
	// RedirectURL (key "redirectURL") is the console's callback as the browser reaches it,
	// such as "https://mcp.example.com/ui/oidc/callback"; empty: derived from each request.
	RedirectURL string
}

// Enabled reports whether the OIDC sign-in is on.
func (o OIDC) Enabled() bool { return o.ClientID != "" }

// JWTAlgorithms are the "alg" values Manifold can verify.
var JWTAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA", "HS256", "HS384", "HS512",
}

// Policy is the "policy" section: which principals may see and use which names. Nil (section
// absent) allows everything.
type Policy struct {
	// Default is Allow or Deny: the decision when no rule matches.
	Default string
	// Rules are evaluated as a set: any matching deny wins, else any matching allow allows.
	Rules []Rule
}

// Rule allows or denies the names and URIs matched by Match to Principals.
type Rule struct {
	// Effect is Allow or Deny: the rule is written {allow: {…}} or {deny: {…}}.
	Effect string
	// Match holds the glob patterns of the rule's allow or deny mapping.
	Match Match
	// Principals lists principal names and "group:<name>" entries; empty means everyone.
	Principals []string
	// Name is an optional label shown in explanations and logs.
	Name string
}

// Match holds glob patterns over names and URIs as clients see them: '*' matches any run of
// characters, '?' one character, everything else itself (case-sensitive).
type Match struct {
	Tools     []string
	Prompts   []string
	Resources []string // resource URIs, as listed and read
	Templates []string // resource template URIs, as listed
	Servers   []string // server names: everything the server exposes
}

// Empty reports whether m has no pattern at all.
func (m Match) Empty() bool {
	return len(m.Tools)+len(m.Prompts)+len(m.Resources)+len(m.Templates)+len(m.Servers) == 0
}

func authFields(a *Auth) []field {
	return []field{
		{name: "resource", ptr: &a.Resource},
		{name: "authorizationServers", ptr: &a.AuthorizationServers},
		{name: "scopes", ptr: &a.Scopes},
		{name: "operators", ptr: &a.Operators},
		{name: "local", sub: []field{
			{name: "name", ptr: &a.Local.Name},
			{name: "groups", ptr: &a.Local.Groups},
		}},
	}
}

func jwtFields(j *JWT) []field {
	return []field{
		{name: "issuer", ptr: &j.Issuer},
		{name: "audience", ptr: &j.Audience},
		{name: "jwksURL", ptr: &j.JWKSURL},
		{name: "publicKey", ptr: &j.PublicKey},
		{name: "publicKeyFile", ptr: &j.PublicKeyFile},
		{name: "secret", ptr: &j.Secret},
		{name: "secretFile", ptr: &j.SecretFile},
		{name: "algorithms", ptr: &j.Algorithms},
		{name: "principalClaim", ptr: &j.PrincipalClaim},
		{name: "groupsClaim", ptr: &j.GroupsClaim},
		{name: "leeway", ptr: &j.Leeway},
		{name: "oidc", sub: []field{
			{name: "clientID", ptr: &j.OIDC.ClientID},
			{name: "clientSecret", ptr: &j.OIDC.ClientSecret},
			{name: "clientSecretFile", ptr: &j.OIDC.ClientSecretFile},
			{name: "scopes", ptr: &j.OIDC.Scopes},
			{name: "redirectURL", ptr: &j.OIDC.RedirectURL},
		}},
	}
}

// policyFields describes the policy section; its rules are decoded by rule.
func policyFields(p *Policy) []field {
	return []field{{name: "default", ptr: &p.Default}, {name: "rules"}}
}

func matchFields(m *Match) []field {
	return []field{
		{name: "tools", ptr: &m.Tools},
		{name: "prompts", ptr: &m.Prompts},
		{name: "resources", ptr: &m.Resources},
		{name: "templates", ptr: &m.Templates},
		{name: "servers", ptr: &m.Servers},
	}
}

// HashAPIKey returns the form in which API keys are kept and compared: "sha256:<hex>".
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return KeyHashPrefix + hex.EncodeToString(sum[:])
}

// auth decodes the auth section.
func (d *decoder) auth(key string, v any, a *Auth) {
	m, ok := d.mapping(key, v)
	if !ok {
		return
	}
	rest := map[string]any{}
	for k, e := range m {
		switch k {
		case "apiKeys":
			d.list(joinKey(key, k), e, func(ik string, e any) {
				var ak APIKey
				d.section(ik, []field{
					{name: "name", ptr: &ak.Name},
					{name: "key", ptr: &ak.Key},
					{name: "keyFile", ptr: &ak.KeyFile},
					{name: "keyHash", ptr: &ak.KeyHash},
					{name: "groups", ptr: &ak.Groups},
				}, e)
				d.secretFile(ik, "key", ak.KeyFile, &ak.Key)
				a.APIKeys = append(a.APIKeys, ak)
			})
		case "jwt":
			if e != nil {
				a.JWT = &JWT{}
				d.section(joinKey(key, k), jwtFields(a.JWT), e)
				d.secretFile(joinKey(key, k), "secret", a.JWT.SecretFile, &a.JWT.Secret)
				d.secretFile(joinKey(key, k)+".oidc", "clientSecret", a.JWT.OIDC.ClientSecretFile, &a.JWT.OIDC.ClientSecret)
			}
		default:
			rest[k] = e
		}
	}
	d.section(key, append(authFields(a), field{name: "apiKeys"}, field{name: "jwt"}), rest)
}

// policy decodes the policy section.
func (d *decoder) policy(key string, v any) *Policy {
	m, ok := d.mapping(key, v)
	if !ok {
		return nil
	}
	p := &Policy{}
	rest := map[string]any{}
	for k, e := range m {
		if k != "rules" {
			rest[k] = e
			continue
		}
		d.list(joinKey(key, k), e, func(rk string, e any) {
			p.Rules = append(p.Rules, d.rule(rk, e))
		})
	}
	d.section(key, policyFields(p), rest)
	return p
}

// rule decodes one policy rule: {allow|deny: {tools: […], …}, principals: […], name: "…"}.
func (d *decoder) rule(key string, v any) Rule {
	var r Rule
	m, ok := d.mapping(key, v)
	if !ok {
		return r
	}
	rest := map[string]any{}
	for k, e := range m {
		switch k {
		case Allow, Deny:
			if r.Effect != "" {
				d.fail(key, "a rule has either allow or deny, not both: write two rules")
				continue
			}
			r.Effect = k
			d.section(joinKey(key, k), matchFields(&r.Match), e)
		default:
			rest[k] = e
		}
	}
	if l, ok := rest["principals"].([]any); ok && len(l) == 0 {
		d.fail(joinKey(key, "principals"), "an empty list matches no one: remove the key to mean everyone")
		delete(rest, "principals")
	}
	d.section(key, []field{{name: "principals", ptr: &r.Principals}, {name: "name", ptr: &r.Name}, {name: Allow}, {name: Deny}}, rest)
	if r.Effect == "" {
		d.fail(key, "a rule needs allow: {…} or deny: {…}")
	}
	return r
}

// mapping returns v as a mapping, reporting anything else but null.
func (d *decoder) mapping(key string, v any) (map[string]any, bool) {
	m, ok := asMap(v)
	if !ok && v != nil {
		d.fail(key, "must be a mapping of keys to values")
	}
	if name := envOnly(m); name != "" {
		d.setBy(key, name) // the environment made this section: blame it for what it lacks
	}
	return m, ok
}

// list calls each for every element of the list v, with the element's key.
func (d *decoder) list(key string, v any, each func(key string, e any)) {
	if v == nil {
		return
	}
	l, ok := v.([]any)
	if !ok {
		d.fail(key, "must be a list")
		return
	}
	for i, e := range l {
		each(fmt.Sprintf("%s[%d]", key, i), e)
	}
}

func (v *validator) auth(a *Auth) {
	seen := map[string]string{} // key hash → key of the first entry
	for i, k := range a.APIKeys {
		key := fmt.Sprintf("auth.apiKeys[%d]", i)
		if v.failed[key] {
			continue // not a mapping: reported already
		}
		v.principalName(key+".name", k.Name)
		v.groups(key+".groups", k.Groups)
		var hash string
		switch {
		case v.failed[key+".key"] || v.failed[key+".keyHash"]:
			continue // reported already (an unset variable, say)
		case v.failed[key+".keyFile"]:
			continue
		case (k.Key == "") == (k.KeyHash == ""):
			v.add(key, "set exactly one of key and keyHash (or keyFile instead of key)")
			continue
		case k.Key != "":
			if len(k.Key) < MinAPIKeyLength {
				v.add(key+"."+secretKey("key", k.KeyFile), fmt.Sprintf("too short: an API key needs at least %d characters", MinAPIKeyLength))
				continue
			}
			hash = HashAPIKey(k.Key)
		default:
			h, ok := strings.CutPrefix(k.KeyHash, KeyHashPrefix)
			if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != 32 {
				v.add(key+".keyHash", `must be "sha256:" followed by 64 hex digits (sha256sum of the key)`)
				continue
			}
			hash = KeyHashPrefix + strings.ToLower(h)
		}
		if first, dup := seen[hash]; dup {
			v.add(key, "the same key as "+first+": every key must be distinct")
		}
		seen[hash] = key
	}
	if a.JWT != nil {
		v.jwt(a)
	}
	if a.Resource != "" {
		v.httpsURL("auth.resource", a.Resource)
	}
	for i, s := range a.AuthorizationServers {
		v.httpsURL(fmt.Sprintf("auth.authorizationServers[%d]", i), s)
	}
	if a.Local.Name != "" {
		v.principalName("auth.local.name", a.Local.Name)
	}
	v.groups("auth.local.groups", a.Local.Groups)
	for i, pr := range a.Operators {
		v.principalEntry(fmt.Sprintf("auth.operators[%d]", i), pr)
	}
}

// principalEntry checks one entry of a list of principals: a name, or "group:<name>".
func (v *validator) principalEntry(key, entry string) {
	if g, ok := strings.CutPrefix(entry, GroupPrefix); ok {
		if strings.TrimSpace(g) == "" {
			v.add(key, "names no group")
		}
	} else if strings.TrimSpace(entry) == "" {
		v.add(key, "must not be empty")
	}
}

func (v *validator) jwt(a *Auth) {
	j := a.JWT
	sources := 0
	for _, s := range []string{j.JWKSURL, j.PublicKey, j.PublicKeyFile, j.Secret} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 && !v.failed["auth.jwt.secretFile"] {
		v.add("auth.jwt", "set exactly one key source: jwksURL, publicKey, publicKeyFile or secret")
	}
	if j.Issuer == "" {
		v.add("auth.jwt.issuer", "is required: tokens from any issuer would be accepted")
	}
	if len(j.Audience) == 0 && a.Resource == "" {
		v.add("auth.jwt.audience", "is required (or set auth.resource): tokens minted for any service would be accepted")
	}
	if j.JWKSURL != "" {
		v.httpsURL("auth.jwt.jwksURL", j.JWKSURL)
	}
	if j.PublicKeyFile != "" {
		v.checkFile("auth.jwt.publicKeyFile", j.PublicKeyFile)
	}
	if j.Secret != "" && len(j.Secret) < 32 {
		v.add("auth.jwt."+secretKey("secret", j.SecretFile), "too short: an HMAC secret needs at least 32 bytes")
	}
	for i, alg := range j.Algorithms {
		if !slices.Contains(JWTAlgorithms, alg) {
			v.add(fmt.Sprintf("auth.jwt.algorithms[%d]", i), "must be one of "+strings.Join(JWTAlgorithms, ", "))
		}
	}
	if j.Leeway < 0 || j.Leeway > 5*time.Minute {
		v.add("auth.jwt.leeway", "must be between 0s and 5m")
	}
	if o := j.OIDC; !o.Enabled() && (o.ClientSecret != "" || len(o.Scopes) > 0 || o.RedirectURL != "") {
		v.add("auth.jwt.oidc.clientID", "is required for the console's OIDC sign-in")
	}
	if j.OIDC.Enabled() && j.Issuer != "" {
		v.httpsURL("auth.jwt.issuer", j.Issuer) // its discovery document is fetched
	}
	if j.OIDC.Enabled() && j.OIDC.RedirectURL != "" {
		v.httpsURL("auth.jwt.oidc.redirectURL", j.OIDC.RedirectURL)
	}
}

// httpsURL checks an absolute https URL; http is accepted for loopback hosts (tests, sidecars).
func (v *validator) httpsURL(key, s string) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		v.add(key, "must be an absolute https URL")
		return
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		v.add(key, "must use https (http is accepted only for a loopback host)")
	}
}

func (v *validator) principalName(key, name string) {
	switch {
	case strings.TrimSpace(name) == "":
		v.add(key, "must not be empty")
	case strings.HasPrefix(name, GroupPrefix):
		v.add(key, fmt.Sprintf("must not start with %q, which marks groups in policy rules", GroupPrefix))
	}
}

func (v *validator) groups(key string, groups []string) {
	for i, g := range groups {
		if strings.TrimSpace(g) == "" {
			v.add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		}
	}
}

func (v *validator) policy(p *Policy) {
	switch p.Default {
	case Allow, Deny:
	case "":
		v.add("policy.default", "is required: allow or deny (what happens when no rule matches)")
	default:
		v.add("policy.default", "must be allow or deny")
	}
	for i, r := range p.Rules {
		key := fmt.Sprintf("policy.rules[%d]", i)
		if v.failed[key] {
			continue
		}
		if r.Effect != "" && r.Match.Empty() && !v.failed[key+"."+r.Effect] {
			v.add(key+"."+r.Effect, "names no tools, prompts, resources, templates or servers")
		}
		for _, list := range [][]string{r.Match.Tools, r.Match.Prompts, r.Match.Resources, r.Match.Templates, r.Match.Servers} {
			if slices.Contains(list, "") {
				v.add(key+"."+r.Effect, "an empty pattern matches nothing; remove it")
				break
			}
		}
		for j, pr := range r.Principals {
			v.principalEntry(fmt.Sprintf("%s.principals[%d]", key, j), pr)
		}
	}
}
