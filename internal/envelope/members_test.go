package envelope

import (
	"errors"
	"testing"
)

func TestMembers(t *testing.T) {
	names := []string{"isError", "_meta"}
	tests := []struct {
		name    string
		obj     string
		isError string
		meta    string
		err     error
	}{
		{name: "both", obj: `{"content":[],"isError":true,"_meta":{"a":1}}`, isError: "true", meta: `{"a":1}`},
		{name: "none", obj: `{"content":[{"type":"text","text":"x"}]}`},
		{name: "empty", obj: `{}`},
		{name: "duplicate", obj: `{"isError":false,"isError":true}`, err: ErrNotSimple},
		{name: "escaped", obj: `{"is\u0045rror":true}`, err: ErrNotSimple},
		{name: "case variant", obj: `{"iserror":true}`, err: ErrNotSimple},
		{name: "not an object", obj: `[1]`, err: ErrNotSimple},
		{name: "truncated", obj: `{"isError":`, err: ErrSyntax},
		{name: "trailing", obj: `{} x`, err: ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := make([]Span, len(names))
			err := Members([]byte(tt.obj), names, spans)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(spans[0].In([]byte(tt.obj))); got != tt.isError {
				t.Errorf("isError = %q, want %q", got, tt.isError)
			}
			if got := string(spans[1].In([]byte(tt.obj))); got != tt.meta {
				t.Errorf("_meta = %q, want %q", got, tt.meta)
			}
		})
	}
}

func TestHasKey(t *testing.T) {
	tests := []struct {
		name string
		v    string
		want bool
	}{
		{name: "text only", v: `{"content":[{"type":"text","text":"uri"}]}`, want: false},
		{name: "resource link", v: `{"content":[{"type":"resource_link","uri":"file:///a"}]}`, want: true},
		{name: "nested embedded", v: `{"content":[{"type":"resource","resource":{"uri":"x"}}]}`, want: true},
		{name: "case variant", v: `{"a":{"URI":"x"}}`, want: true},
		{name: "escaped key", v: `{"a":{"u\u0072i":"x"}}`, want: true},
		{name: "escaped other key", v: `{"\u0061":1}`, want: true},
		{name: "scalar", v: `"uri"`, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := HasKey([]byte(tt.v), "uri")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("HasKey = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := HasKey([]byte(`{"uri":`), "uri"); !errors.Is(err, ErrSyntax) {
		t.Errorf("truncated: err = %v", err)
	}
}

func TestRemoveMember(t *testing.T) {
	tests := []struct {
		name, obj, want string
		removed         bool
		err             error
	}{
		{name: "only", obj: `{"k":{"a":1}}`, want: `{}`, removed: true},
		{name: "first", obj: `{"k":1, "b":2}`, want: `{"b":2}`, removed: true},
		{name: "middle", obj: `{"a":1,"k":[1,{"k":2}],"b":2}`, want: `{"a":1,"b":2}`, removed: true},
		{name: "last", obj: `{"a":1 , "k":"x" }`, want: `{"a":1 }`, removed: true},
		{name: "absent", obj: `{"a":{"k":1}}`, want: `{"a":{"k":1}}`},
		{name: "empty", obj: `{}`, want: `{}`},
		{name: "duplicate", obj: `{"k":1,"k":2}`, err: ErrNotSimple},
		{name: "escaped", obj: `{"\u006b":1}`, err: ErrNotSimple},
		{name: "truncated", obj: `{"k":1`, err: ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, removed, err := RemoveMember([]byte(tt.obj), "k")
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want || removed != tt.removed {
				t.Errorf("RemoveMember = %s, %v, %v; want %s, %v", got, removed, err, tt.want, tt.removed)
			}
		})
	}
}
