package gateway

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// sseData returns the data of each event of an SSE body, data lines
// joined with newlines as a client joins them.
func sseData(t *testing.T, body string) []string {
	t.Helper()
	var out, data []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				out = append(out, strings.Join(data, "\n"))
				data = nil
			}
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "id:"):
			t.Errorf("event with an id: %q", line)
		}
	}
	return out
}

func TestCallResponse(t *testing.T) {
	const result = `{"jsonrpc":"2.0","id":1,"result":{"a":` + "\r\n  1\n}}"
	const progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`
	tests := []struct {
		name     string
		events   []string
		status   int
		wantType string
		want     []string // the body (JSON) or its events' data (SSE)
	}{
		{name: "the result first: JSON", status: http.StatusOK, wantType: "application/json", want: []string{result}},
		{name: "an error status kept", status: http.StatusBadRequest, wantType: "application/json", want: []string{result}},
		{name: "a notification first: SSE", events: []string{progress, progress}, status: http.StatusOK,
			wantType: "text/event-stream", want: []string{progress, progress, result}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c := &callResponse{w: rec}
			for _, e := range tt.events {
				if !c.event([]byte(e)) {
					t.Fatal("event refused before the result")
				}
			}
			c.finish(tt.status, []byte(result))
			if c.event([]byte(progress)) {
				t.Error("event accepted after the result")
			}
			c.finish(http.StatusOK, []byte(`{}`)) // ignored
			if got := rec.Header().Get("Content-Type"); got != tt.wantType {
				t.Fatalf("Content-Type %q, want %q", got, tt.wantType)
			}
			if tt.wantType == "application/json" {
				if rec.Code != tt.status || rec.Body.String() != result {
					t.Fatalf("%d %q, want %d %q", rec.Code, rec.Body, tt.status, result)
				}
				return
			}
			got := sseData(t, rec.Body.String())
			if len(got) != len(tt.want) {
				t.Fatalf("events %q, want %q", got, tt.want)
			}
			for i := range got {
				var a, b any
				if json.Unmarshal([]byte(got[i]), &a) != nil || json.Unmarshal([]byte(tt.want[i]), &b) != nil || !reflect.DeepEqual(a, b) {
					t.Fatalf("event %d: %q is not the JSON of %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}
