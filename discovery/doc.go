// Package discovery is the search index behind the gateway's progressive
// discovery: a ranked full-text index over tool names, titles and
// descriptions, and the parser of the queries clients send. It is pure: no
// I/O, no knowledge of MCP sessions or policy (the caller filters hits).
package discovery
