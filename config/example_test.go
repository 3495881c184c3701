package config_test

import (
	"fmt"

	"github.com/manifold-mcp/manifold/config"
)

// A Claude Desktop file loads unchanged; servers get their namespaces from their names.
func ExampleParse() {
	doc := []byte(`{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "weather.api": {"url": "https://weather.example.com/mcp", "headers": {"Authorization": "Bearer ${WEATHER_TOKEN}"}}
  }
}`)
	opts := &config.LoadOptions{
		LookupEnv: func(name string) (string, bool) { return "secret", name == "WEATHER_TOKEN" },
		Environ:   []string{},
	}
	cfg, err := config.Parse(doc, config.FormatJSON, "claude_desktop_config.json", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range cfg.Enabled() {
		fmt.Println(s.Name, s.Type, s.Namespace())
	}
	fmt.Println(cfg.Gateway.Listen)
	// Output:
	// filesystem stdio filesystem
	// weather.api http weather_api
	// 127.0.0.1:8080
}

// Every problem is reported at once, each naming its file and key.
func ExampleFieldErrors() {
	doc := []byte(`
mcpServers:
  weather:
    url: weather.example.com/mcp
gateway:
  listen: 0.0.0.0:8080
  limits: {maxSesions: 10}
`)
	_, err := config.Parse(doc, config.FormatYAML, "manifold.yaml", &config.LoadOptions{Environ: []string{}})
	for _, fe := range config.FieldErrors(err) {
		fmt.Println(fe)
	}
	// Output:
	// manifold.yaml: gateway.limits.maxSesions: unknown key (did you mean "maxSessions"?)
	// manifold.yaml: gateway.listen: a non-loopback address requires authentication (auth.apiKeys or auth.jwt), or gateway.insecure: true to accept that anyone who can reach the address may use every upstream server
	// manifold.yaml: mcpServers.weather.url: must be an absolute http(s) URL
}
