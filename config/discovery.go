package config

import (
	"fmt"
	"maps"
	"slices"
)

// Discovery modes (key "gateway.discovery.mode" and the values of "gateway.discovery.groups").
const (
	// DiscoveryFull lists every tool the principal may use; the default.
	DiscoveryFull = "full"
	// DiscoveryProgressive lists the gateway's three discovery tools (search, describe, call)
	// and the Always tools instead of the whole catalog.
	DiscoveryProgressive = "progressive"
)

// Discovery chooses how clients discover tools (key "gateway.discovery").
type Discovery struct {
	// Mode (key "mode") is the mode of every principal no group names: "full" (default) or
	// "progressive".
	Mode string
	// Groups (key "groups") maps a principal group to its mode, overriding Mode. A principal
	// in several listed groups whose modes differ gets "full": listing hides nothing.
	Groups map[string]string
	// Always (key "always") holds glob patterns over tool names as clients see them: the
	// matching tools stay listed in progressive mode, beside the discovery tools.
	Always []string
}

// Progressive reports whether some principal may get progressive discovery.
func (d Discovery) Progressive() bool {
	if d.Mode == DiscoveryProgressive {
		return true
	}
	for _, m := range d.Groups {
		if m == DiscoveryProgressive {
			return true
		}
	}
	return false
}

func discoveryFields(d *Discovery) []field {
	return []field{
		{name: "mode", ptr: &d.Mode},
		{name: "groups", ptr: &d.Groups},
		{name: "always", ptr: &d.Always},
	}
}

func validMode(m string) bool { return m == DiscoveryFull || m == DiscoveryProgressive }

// discovery validates the gateway.discovery section.
func (v *validator) discovery(d Discovery) {
	if d.Mode != "" && !validMode(d.Mode) {
		v.add("gateway.discovery.mode", "must be full or progressive")
	}
	for _, g := range slices.Sorted(maps.Keys(d.Groups)) {
		switch {
		case g == "":
			v.add("gateway.discovery.groups", "a group name must not be empty")
		case !validMode(d.Groups[g]):
			v.add("gateway.discovery.groups."+g, "must be full or progressive")
		}
	}
	if slices.Contains(d.Always, "") {
		v.add("gateway.discovery.always", "an empty pattern matches nothing; remove it")
	}
	for i, p := range d.Always {
		if len(p) > 1024 {
			v.add(fmt.Sprintf("gateway.discovery.always[%d]", i), "must be at most 1024 characters")
		}
	}
}
