package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// sseEventsRef is the SSE reading sseReader follows (the SDK's), written
// plainly over the whole input: the oracle of FuzzSSEReader.
func sseEventsRef(in string) ([]string, bool) {
	var out []string
	var data []string
	has := false
	lines := strings.SplitAfter(in, "\n")
	for _, line := range lines {
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if has {
				out = append(out, strings.Join(data, "\n"))
			}
			data, has = nil, false
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if !found {
			return out, false
		}
		if field == "data" {
			data, has = append(data, strings.TrimSpace(value)), true
		}
	}
	if has {
		out = append(out, strings.Join(data, "\n"))
	}
	return out, true
}

// FuzzSSEReader: whatever an upstream streams, sseReader returns the
// events the SDK's reading finds, then io.EOF or a malformed-line error,
// with any read buffer size, and never panics.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"manifold-1\",\"result\":{}}\n\n",
		"data: a\ndata:  b \r\n\r\nid: 3\n\n: comment\ndata: c",
		"data: x\nbad line\n\n", "\n\n\r\n", "data\n", "data:\n\n", "retry: 1\nid: 2\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, ok := sseEventsRef(string(in))
		// A small read buffer: long lines are common.
		r := sseReader{br: bufio.NewReaderSize(bytes.NewReader(in), 16)}
		var got []string
		var err error
		for range len(in) + 2 {
			var data []byte
			if data, err = r.next(); err != nil {
				break
			}
			got = append(got, string(data))
		}
		switch {
		case ok && !errors.Is(err, io.EOF), !ok && !errors.Is(err, errMalformedEvent):
			t.Fatalf("error %v; reference ok = %v", err, ok)
		case strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want):
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}
