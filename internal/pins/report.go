package pins

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteList writes the pins f selects as a table: server, kind, name, state and the hashes
// (approved, and pending when there is one), as `manifold pins list` shows them.
func WriteList(w io.Writer, s *Set, f Filter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tKIND\tNAME\tSTATE\tAPPROVED\tPENDING")
	for _, e := range s.Entries(f) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Server, e.Kind, e.Name, e.State(), short(e.Approved), short(e.Pending))
	}
	return tw.Flush()
}

// short is a definition's hash shortened for a table, or "-".
func short(d *Definition) string {
	if d == nil {
		return "-"
	}
	if len(d.Hash) > 19 {
		return d.Hash[:19]
	}
	return d.Hash
}

// WriteDiffs writes the diff of every pin f selects that has a pending definition, and
// returns how many it wrote.
func WriteDiffs(w io.Writer, s *Set, f Filter) (int, error) {
	n := 0
	for _, e := range s.Entries(f) {
		if e.Pending == nil {
			continue
		}
		if n > 0 {
			fmt.Fprintln(w)
		}
		if err := WriteDiff(w, e); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// ApproveIn approves, in store, the pending definitions of the pins f selects, and writes
// what it approved to w. A running gateway that watches the store applies it at once.
func ApproveIn(ctx context.Context, store Store, f Filter, w io.Writer) (int, error) {
	var done []Entry
	_, err := store.Update(ctx, func(s *Set) error {
		done = s.Approve(f, time.Now())
		if len(done) == 0 {
			return ErrUnchanged
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, e := range done {
		fmt.Fprintf(w, "approved %s %q of server %q: %s\n", e.Kind, e.Name, e.Server, e.Approved.Hash)
	}
	return len(done), nil
}
