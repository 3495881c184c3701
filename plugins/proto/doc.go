// Package proto is the versioned gRPC service between the gateway and its
// hook plugins (plugin.proto, package manifold.plugin.v1). The Go code is
// generated and committed; regenerate it after editing plugin.proto with
// protoc 3.21+ (Debian: apt-get install protobuf-compiler) and the pinned
// generators:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	go generate ./plugins/proto
package proto

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
