package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestSSEReaderLongData: data lines longer than the read buffer, across
// the gathering blocks' sizes, come back whole and in order, and past the
// reader's bound the answer is ErrTooLarge.
func TestSSEReaderLongData(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		max  int
	}{
		{"just over the buffer", 4097, 0},
		{"several blocks", gatherMax + 3*gatherMin + 7, 0},
		{"many full blocks", 4*gatherMax + 1, 0},
		// The bound counts the line as sent, its trailing blanks too.
		{"at the bound", 100_000, 100_000 + len(`{"x":""}  `+"\r\n")},
		{"over the bound", 100_000, 99_999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value := `{"x":"` + strings.Repeat("abcdefghij", tc.size/10+1)[:tc.size] + `"}`
			in := "event: message\ndata: " + value + "  \r\n\r\ndata: next\n\n"
			r := sseReader{br: bufio.NewReader(strings.NewReader(in)), max: tc.max}
			data, err := r.next()
			if tc.max > 0 && tc.max < 100_000 {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v, want ErrTooLarge", err)
				}
				return
			}
			if err != nil || string(data) != value {
				t.Fatalf("event of %d bytes, error %v; want the %d bytes sent", len(data), err, len(value))
			}
			if data, err = r.next(); err != nil || string(data) != "next" {
				t.Fatalf("next event %q, %v; want \"next\"", data, err)
			}
		})
	}
}

// TestSSEReaderLargeEventAllocatesTwice: a 4 MiB event is gathered and
// joined once (about twice its size allocated), not grown by append,
// which allocates and copies it many times over (over 5 times its size).
func TestSSEReaderLargeEventAllocatesTwice(t *testing.T) {
	const size = 4 << 20
	in := []byte("data: " + strings.Repeat("x", size) + "\n\n")
	r := sseReader{br: bufio.NewReader(bytes.NewReader(in))}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	data, err := r.next()
	runtime.ReadMemStats(&after)
	if err != nil || len(data) != size {
		t.Fatalf("event of %d bytes, %v; want %d", len(data), err, size)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 5*size/2 {
		t.Fatalf("reading a %d-byte event allocated %d bytes (%.2fx), want at most 2.5x", size, got, float64(got)/size)
	}
}
