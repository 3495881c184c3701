package upstream

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// maxSafeInteger bounds the integers an x-mcp-header parameter may carry
// (JavaScript's safe range, as the spec says).
const maxSafeInteger = 1<<53 - 1

// paramBinding is one x-mcp-header annotation of a tool's input schema:
// the argument at path goes in header (canonical "Mcp-Param-{name}").
type paramBinding struct {
	path   []string
	header string
}

// paramHeaders are the annotated parameters of the tools of one catalog,
// by tool name; only tools with annotations are present.
type paramHeaders struct {
	cat   *Catalog
	tools map[string][]paramBinding
}

// schemaProps is what x-mcp-header processing reads of an input schema.
type schemaProps struct {
	Header     json.RawMessage        `json:"x-mcp-header"`
	Properties map[string]schemaProps `json:"properties"`
}

// newParamHeaders finds the annotated parameters of cat's tools: those
// statically reachable through "properties" (the spec's rule).
func newParamHeaders(cat *Catalog) *paramHeaders {
	p := &paramHeaders{cat: cat}
	if cat == nil {
		return p
	}
	for _, tool := range cat.Tools {
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil || !strings.Contains(string(raw), `"x-mcp-header"`) {
			continue
		}
		var s schemaProps
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		if b := collectBindings(s.Properties, nil, nil); len(b) > 0 {
			if p.tools == nil {
				p.tools = map[string][]paramBinding{}
			}
			p.tools[tool.Name] = b
		}
	}
	return p
}

func collectBindings(props map[string]schemaProps, prefix []string, out []paramBinding) []paramBinding {
	for name, prop := range props {
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(prop.Header, &header) == nil && header != "" {
			out = append(out, paramBinding{path: path, header: http.CanonicalHeaderKey("Mcp-Param-" + header)})
		}
		out = collectBindings(prop.Properties, path, out)
	}
	return out
}

// toolBindings returns the annotated parameters of tool name in the
// current catalog, computed once per catalog.
func (h *httpRaw) toolBindings(name string) []paramBinding {
	cat := h.u.Catalog()
	p := h.params.Load()
	if p == nil || p.cat != cat {
		p = newParamHeaders(cat)
		h.params.Store(p)
	}
	return p.tools[name]
}

// setParamHeaders sets the Mcp-Param-* headers of a tools/call whose tool
// has annotated parameters, from the arguments in params, as the SDK's
// client does: an argument that is absent, null or not a string, boolean
// or safe integer gets no header.
func setParamHeaders(hdr http.Header, bindings []paramBinding, params []byte) {
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	for _, b := range bindings {
		args, raw := p.Arguments, json.RawMessage(nil)
		for i, key := range b.path {
			raw = args[key]
			if i < len(b.path)-1 && (raw == nil || json.Unmarshal(raw, &args) != nil) {
				raw = nil
				break
			}
		}
		if v, ok := primitiveHeader(raw); ok {
			hdr[b.header] = []string{headerValue(v)}
		}
	}
}

// primitiveHeader returns the header form of a string, boolean or safe
// integer JSON value.
func primitiveHeader(raw json.RawMessage) (string, bool) {
	var v any
	if raw == nil || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > maxSafeInteger {
			return "", false
		}
		return strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

// headerValue returns v as the value of an Mcp-Name or Mcp-Param-*
// header: as it is when it is plain visible ASCII (spaces inside), else in
// the spec's Base64 sentinel form, as is a plain value that looks like one.
func headerValue(v string) string {
	plain := v == "" || v[0] != ' ' && v[len(v)-1] != ' ' &&
		!(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; plain && i < len(v); i++ {
		plain = 0x20 <= v[i] && v[i] <= 0x7e
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
