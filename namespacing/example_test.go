package namespacing_test

import (
	"fmt"

	"github.com/manifold-mcp/manifold/namespacing"
)

func ExampleName() {
	opts := namespacing.Options{} // separator "__", at most 64 characters
	fmt.Println(namespacing.Name("everything", "echo", opts))
	fmt.Println(namespacing.Name("fs", "read.file", opts))
	fmt.Println(namespacing.Name("", "get-weather", opts))
	fmt.Println(namespacing.Name("github", "repos/manifold-mcp/manifold/issues/comments.create_or_update", opts))
	// Output:
	// everything__echo
	// fs__read_file
	// get-weather
	// github__repos_manifold-mcp_manifold_issues_comments_cre_8ea077db
}

func ExampleWrapURI() {
	wrapped := namespacing.WrapURI("everything", "test://static/resource/1")
	fmt.Println(wrapped)
	fmt.Println(namespacing.WrapURI("everything", "test://static/resource/{id}"))
	fmt.Println(namespacing.WrapURI("", "test://static/resource/1"))
	fmt.Println(namespacing.UnwrapURI(wrapped))
	// Output:
	// manifold://everything/test://static/resource/1
	// manifold://everything/test://static/resource/{id}
	// test://static/resource/1
	// everything test://static/resource/1 true
}

func ExampleMerge() {
	table, ordered, collisions := namespacing.Merge([]namespacing.Source{
		{Server: "weather", Prefix: "weather", Names: []string{"forecast"}},
		{Server: "local", Prefix: "", Names: []string{"weather.forecast", "weather__forecast"}},
	}, namespacing.Options{})
	for _, e := range ordered {
		fmt.Printf("%s -> %s/%s\n", e.Exposed, e.Server, e.Original)
	}
	fmt.Println(table["weather__forecast"].Server)
	for _, c := range collisions {
		fmt.Println(c)
	}
	// Output:
	// weather__forecast -> local/weather__forecast
	// weather_forecast -> local/weather.forecast
	// local
	// name "weather__forecast" from server "weather" (tool "forecast") collides with server "local" (tool "weather__forecast"); dropped
}

func ExampleOwners() {
	owners := namespacing.NewOwners(
		map[string]string{"test://static/resource/1": "everything"},
		map[string]string{"test://static/resource/{id}": "everything", "file:///{+path}": "fs"},
		"",
	)
	fmt.Println(owners.Lookup("file:///etc/hosts"))
	fmt.Println(owners.Lookup("ftp://elsewhere"))
	// Output:
	// fs true
	//  false
}
