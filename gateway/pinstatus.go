package gateway

import (
	"cmp"
	"slices"
	"time"

	"github.com/manifold-mcp/manifold/internal/pins"
)

// HeldStatus is an item tool pinning holds (docs/architecture.md, Tool
// pinning), as GET /status reports it: absent from every list and unknown
// to calls until `manifold pins approve` approves it, so that an operator
// sees why a tool is missing.
type HeldStatus struct {
	Server string `json:"server"`
	// Kind is "tool" or "prompt"; Name the item's name as its upstream
	// serves it (what `manifold pins` selects with --tool and --prompt).
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Reason is "changed" (the upstream serves a definition other than the
	// approved one, under mode block) or "new" (never approved, under
	// newTools: hold).
	Reason string `json:"reason"`
	// Since is when the definition held was first seen.
	Since time.Time `json:"since"`
	// Hash is the held definition's, ApprovedHash the approved one's
	// (none for a new item).
	Hash         string `json:"hash"`
	ApprovedHash string `json:"approvedHash,omitempty"`
}

// Reasons of HeldStatus.
const (
	heldChanged = "changed"
	heldNew     = "new"
)

// heldStatus describes the items of held as set records them, sorted by
// server, kind and name.
func heldStatus(set *pins.Set, held map[heldKey]bool) []HeldStatus {
	if set == nil || len(held) == 0 {
		return nil
	}
	out := make([]HeldStatus, 0, len(held))
	for k := range held {
		h := HeldStatus{Server: k.server, Kind: k.kind, Name: k.name, Reason: heldNew}
		if pin := set.Lookup(k.server, k.kind, k.name); pin != nil {
			if pin.Pending != nil {
				h.Since, h.Hash = pin.Pending.At, pin.Pending.Hash
			}
			if pin.Approved != nil {
				h.Reason, h.ApprovedHash = heldChanged, pin.Approved.Hash
			}
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b HeldStatus) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out
}
