package authn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// Default claims naming the principal and its groups.
const (
	defaultPrincipalClaim = "sub"
	defaultGroupsClaim    = "groups"
)

// jwtVerifier verifies JWTs and maps their claims to an Identity. It is immutable.
type jwtVerifier struct {
	parser         *jwt.Parser
	src            *keySource
	algs           []string // accepted "alg" values
	audience       []string // accepted "aud" values: any one must be present
	principalClaim string
	groupsClaim    string
	issuer         string
	// id fingerprints the settings (Identity.verifier): a JWT verified under other settings no
	// longer resolves (Authenticator.Resolve).
	id string

	// Rejections naming the configured claims, built once.
	errPrincipalMissing rejection
	errPrincipalType    rejection
	errPrincipalGroup   rejection
	errGroupsType       rejection
}

// newJWTVerifier returns the verifier of cfg.JWT with the keys of src.
func newJWTVerifier(cfg *config.Auth, src *keySource, now func() time.Time) (*jwtVerifier, error) {
	j := cfg.JWT
	if j.Issuer == "" {
		return nil, errors.New("auth.jwt.issuer: is required: tokens from any issuer would be accepted")
	}
	audience := j.Audience
	if len(audience) == 0 && cfg.Resource != "" {
		audience = []string{cfg.Resource}
	}
	if len(audience) == 0 || slices.Contains(audience, "") {
		return nil, errors.New("auth.jwt.audience: is required (or set auth.resource): tokens minted for any service would be accepted")
	}
	algs, err := src.algorithms(j.Algorithms)
	if err != nil {
		return nil, err
	}
	v := &jwtVerifier{
		src:            src,
		algs:           algs,
		audience:       slices.Clone(audience),
		principalClaim: cmpOr(j.PrincipalClaim, defaultPrincipalClaim),
		groupsClaim:    cmpOr(j.GroupsClaim, defaultGroupsClaim),
		issuer:         j.Issuer,
	}
	v.id = fingerprint(j, audience)
	v.errPrincipalMissing = rejection("claim " + v.principalClaim + " missing")
	v.errPrincipalType = rejection("claim " + v.principalClaim + " is not a string")
	v.errPrincipalGroup = rejection("claim " + v.principalClaim + " starts with " + config.GroupPrefix)
	v.errGroupsType = rejection("claim " + v.groupsClaim + " is neither a list of strings nor a string")
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithIssuer(j.Issuer),
		jwt.WithAudience(v.audience...), // any one of them (jwt/v5 ≥ 5.3.0)
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(j.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
	)
	return v, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// verify checks the signature and the registered claims of token, then reads the principal, its
// groups and the scopes.
func (v *jwtVerifier) verify(ctx context.Context, token string) (*Identity, error) {
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(token, claims, v.src.keyfunc(ctx))
	if err != nil {
		return nil, v.reason(ctx, tok, claims, err)
	}
	name, err := v.principal(claims)
	if err != nil {
		return nil, err
	}
	var groups []string
	if raw := claims[v.groupsClaim]; raw != nil {
		var ok bool
		if groups, ok = stringList(raw); !ok {
			return nil, v.errGroupsType
		}
	}
	scopes, err := scopes(claims)
	if err != nil {
		return nil, err
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil { // required and checked by the parser
		return nil, errExpMissing
	}
	return &Identity{
		Principal: policy.NewPrincipal(name, groups),
		Method:    MethodJWT,
		Expiry:    exp.Time,
		Scopes:    scopes,
		Source:    v.issuer,
		verifier:  v.id,
	}, nil
}

// principal returns the principal's name: the principal claim, a non-blank string that does not
// look like a group of the policy.
func (v *jwtVerifier) principal(claims jwt.MapClaims) (string, error) {
	raw := claims[v.principalClaim]
	if raw == nil {
		return "", v.errPrincipalMissing
	}
	name, ok := raw.(string)
	switch {
	case !ok:
		return "", v.errPrincipalType
	case strings.TrimSpace(name) == "":
		return "", v.errPrincipalMissing
	case strings.HasPrefix(name, config.GroupPrefix):
		return "", v.errPrincipalGroup
	}
	return name, nil
}

// Rejections about the registered claims and the scopes.
const (
	errExpMissing   rejection = "claim exp missing"
	errIssMissing   rejection = "claim iss missing"
	errAudMissing   rejection = "claim aud missing"
	errExpMalformed rejection = "claim exp malformed"
	errNbfMalformed rejection = "claim nbf malformed"
	errIatMalformed rejection = "claim iat malformed"
	errIssMalformed rejection = "claim iss malformed"
	errAudMalformed rejection = "claim aud malformed"
	errScopeType    rejection = "claim scope is neither a string nor a list of strings"
	errScpType      rejection = "claim scp is neither a string nor a list of strings"
)

// scopes returns the scopes of the "scope" claim or, without it, of the "scp" claim; nil when
// there are none.
func scopes(claims jwt.MapClaims) ([]string, error) {
	if raw := claims["scope"]; raw != nil {
		s, ok := stringList(raw)
		if !ok {
			return nil, errScopeType
		}
		return s, nil
	}
	if raw := claims["scp"]; raw != nil {
		s, ok := stringList(raw)
		if !ok {
			return nil, errScpType
		}
		return s, nil
	}
	return nil, nil
}

// stringList returns the non-empty strings of a JSON list of strings, or the space-separated
// words of a string; nil when there are none. It reports false for any other JSON value.
func stringList(raw any) ([]string, bool) {
	switch raw := raw.(type) {
	case string:
		if f := strings.Fields(raw); len(f) > 0 {
			return f, true
		}
		return nil, true
	case []any:
		var list []string
		for _, e := range raw {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			if s != "" {
				list = append(list, s)
			}
		}
		return list, true
	}
	return nil, false
}

// reason maps an error of the JWT parser to a rejection, or to ctx's error when ctx ended while
// the keys were being fetched.
func (v *jwtVerifier) reason(ctx context.Context, tok *jwt.Token, claims jwt.MapClaims, err error) error {
	var r rejection
	switch {
	case errors.As(err, &r):
		return r
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return fmt.Errorf("authn: fetching the JWKS: %w", context.Cause(ctx))
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errMalformed
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// "alg" is missing, not a string or unknown to the library.
		if tok == nil {
			return errMalformed
		}
		if _, ok := tok.Header["alg"].(string); !ok {
			return errMalformed
		}
		return errAlgorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// The parser checks "alg" against WithValidMethods before the signature, with the same
		// error.
		if tok == nil || tok.Method == nil || !slices.Contains(v.algs, tok.Method.Alg()) {
			return errAlgorithm
		}
		return errSignature
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return claimsReason(claims, err)
	}
	return errMalformed
}

// claimsReason returns the first reason the registered claims were refused for: a claim of the
// wrong type, a required claim missing, then the time, issuer and audience checks.
func claimsReason(claims jwt.MapClaims, err error) rejection {
	if _, e := claims.GetExpirationTime(); e != nil {
		return errExpMalformed
	}
	if _, e := claims.GetNotBefore(); e != nil {
		return errNbfMalformed
	}
	if _, e := claims.GetIssuedAt(); e != nil {
		return errIatMalformed
	}
	if _, e := claims.GetIssuer(); e != nil {
		return errIssMalformed
	}
	if _, e := claims.GetAudience(); e != nil {
		return errAudMalformed
	}
	if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) {
		exp, _ := claims.GetExpirationTime()
		iss, _ := claims.GetIssuer()
		switch {
		case exp == nil:
			return errExpMissing
		case iss == "":
			return errIssMissing
		default:
			return errAudMissing
		}
	}
	for _, c := range []struct {
		err error
		r   rejection
	}{
		{jwt.ErrTokenExpired, errExpired},
		{jwt.ErrTokenNotValidYet, errNotYetValid},
		{jwt.ErrTokenUsedBeforeIssued, errIssuedFuture},
		{jwt.ErrTokenInvalidIssuer, errIssuer},
		{jwt.ErrTokenInvalidAudience, errAudience},
	} {
		if errors.Is(err, c.err) {
			return c.r
		}
	}
	return errClaims
}

// fingerprint returns a hash of the JWT settings j with the audience in force: equal for equal
// settings, so that a reload that keeps them keeps the sessions of their JWTs. It holds no
// secret (the HMAC secret goes into the hash only).
func fingerprint(j *config.JWT, audience []string) string {
	b, _ := json.Marshal(struct {
		JWT      *config.JWT
		Audience []string
	}{j, audience}) // plain strings, lists and a duration: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
