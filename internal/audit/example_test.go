package audit_test

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
)

// A Log records one line per call; here with full arguments and a redaction pattern.
func ExampleLog_Write() {
	l, err := audit.New(&config.Audit{Stdout: true, Arguments: config.ArgumentsFull, Redact: []string{"*token*"}},
		&audit.Options{Stdout: os.Stdout})
	if err != nil {
		panic(err)
	}
	l.Write(&audit.Record{
		Time:     time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC),
		Duration: 42 * time.Millisecond,
		Method:   "tools/call", Principal: "alice", Server: "github", Name: "github__create_issue",
		UpstreamName: "create_issue", Decision: audit.DecisionAllow, Outcome: audit.OutcomeOK, ResultBytes: 512, Rounds: 1,
		Arguments: json.RawMessage(`{"title": "Bug", "auth": {"accessToken": "ghp_x"}}`),
	})
	if err := l.Close(context.Background()); err != nil {
		panic(err)
	}
	// Output:
	// {"time":"2026-07-01T12:00:00Z","duration_ms":42,"method":"tools/call","principal":"alice","server":"github","name":"github__create_issue","upstream_name":"create_issue","decision":"allow","outcome":"ok","result_bytes":512,"rounds":1,"arguments":{"auth":{"accessToken":"[REDACTED]"},"title":"Bug"}}
}
