package pins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// FieldChange is one top-level field of a definition that differs between two versions:
// its old and new values as text (a string's own text, else indented JSON); empty for a
// field one side lacks.
type FieldChange struct {
	Field    string
	Old, New string
	// Added and Removed: the field exists on one side only.
	Added, Removed bool
}

// Diff compares two definitions (JSON objects, as Digest makes them) field by field and
// returns the changed fields, sorted by name.
func Diff(old, cur []byte) ([]FieldChange, error) {
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(old, &a); err != nil {
		return nil, fmt.Errorf("pins: old definition: %w", err)
	}
	if err := json.Unmarshal(cur, &b); err != nil {
		return nil, fmt.Errorf("pins: new definition: %w", err)
	}
	var fields []string
	for k := range a {
		fields = append(fields, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			fields = append(fields, k)
		}
	}
	slices.Sort(fields)
	var out []FieldChange
	for _, k := range fields {
		va, ina := a[k]
		vb, inb := b[k]
		if ina && inb && bytes.Equal(va, vb) {
			continue // canonical JSON: equal values are equal bytes
		}
		out = append(out, FieldChange{Field: k, Old: text(va), New: text(vb), Added: !ina, Removed: !inb})
	}
	return out, nil
}

// text is v as a person reads it: a string's text, or indented JSON.
func text(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Indent(&buf, v, "", "  ") != nil {
		return string(v)
	}
	return buf.String()
}

// WriteDiff writes the difference between a pin's approved and pending definitions to w, as
// `manifold pins diff` shows it: each changed field, then its lines, "-" old and "+" new (a
// line diff, so a long schema shows only what changed). A pin never approved is shown whole.
func WriteDiff(w io.Writer, e Entry) error {
	fmt.Fprintf(w, "%s %q of server %q: %s\n", e.Kind, e.Name, e.Server, e.State())
	if e.Pending == nil {
		_, err := fmt.Fprintln(w, "  no pending change")
		return err
	}
	if e.Approved == nil {
		fmt.Fprintf(w, "  never approved; served definition (%s):\n", e.Pending.Hash)
		for _, l := range strings.Split(text(e.Pending.Definition), "\n") {
			fmt.Fprintf(w, "    + %s\n", l)
		}
		return nil
	}
	changes, err := Diff(e.Approved.Definition, e.Pending.Definition)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  approved %s (%s)\n  served   %s (first seen %s)\n", e.Approved.Hash, e.Approved.At.UTC().Format("2006-01-02 15:04:05Z"),
		e.Pending.Hash, e.Pending.At.UTC().Format("2006-01-02 15:04:05Z"))
	for _, c := range changes {
		what := "changed"
		switch {
		case c.Added:
			what = "added"
		case c.Removed:
			what = "removed"
		}
		fmt.Fprintf(w, "  field %s %s:\n", c.Field, what)
		for _, l := range lineDiff(c.Old, c.New) {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	return nil
}

// lineDiff returns the lines of a and b as a diff: common lines with "  ", removed with
// "- ", added with "+ " (longest common subsequence; definitions are small).
func lineDiff(a, b string) []string {
	var x, y []string
	if a != "" {
		x = strings.Split(a, "\n")
	}
	if b != "" {
		y = strings.Split(b, "\n")
	}
	if len(x)*len(y) > 1_000_000 { // too large to align: show both whole
		var out []string
		for _, l := range x {
			out = append(out, "- "+l)
		}
		for _, l := range y {
			out = append(out, "+ "+l)
		}
		return out
	}
	// lcs[i][j] is the length of the LCS of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out = append(out, "  "+x[i])
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, "+ "+y[j])
			j++
		default:
			out = append(out, "- "+x[i])
			i++
		}
	}
	return out
}
