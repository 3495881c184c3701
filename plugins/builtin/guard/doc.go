// Package guard is the engine of the built-in `guard` plugin: it blocks
// tool calls whose arguments match its rules, per tool and argument path,
// with the rule's message as the error the client sees. The plugin host
// (package plugins) calls Check from the tool_pre_call hook
// (docs/architecture.md, plugins).
//
// # Config
//
// The plugin's `config:` (New receives it as JSON):
//
//	plugins:
//	  - name: guard
//	    builtin: guard
//	    config:
//	      rules:
//	        - name: no-traversal
//	          tools: ["files__*"]              # default: every tool
//	          arguments: [path, "paths.*"]     # default: every value
//	          pathTraversal:
//	            sensitiveRoots: [/etc, /root, /proc, ~/.ssh, 'C:\Windows']
//	          message: path traversal is not allowed
//	        - name: no-shell-chaining
//	          tools: [shell__run]
//	          arguments: [command]
//	          shellMetacharacters: true
//	          message: one command at a time, no pipes or redirection
//	        - name: fetch-allow-list
//	          tools: ["web__fetch*"]
//	          arguments: [url]
//	          urlAllowList: [example.com, "*.internal.example.com"]
//	          message: this server may only fetch from example.com
//	        - name: no-rm-rf
//	          tools: ["shell__*"]
//	          regex: 'rm\s+-(rf|fr)\b'
//	          message: rm -rf is not allowed
//	        - name: no-dotenv
//	          arguments: [file]
//	          glob: "*.env"
//
// A rule's keys:
//
//   - name (required, unique): returned in the Verdict and recorded in the
//     audit log.
//   - tools: globs over the tool's namespaced name as policy sees it
//     (path.Match: `*` any run of characters, `?` one, `[a-z]` a class).
//   - arguments: paths into the arguments object: keys joined by `.`, `*` for
//     any key or array element, a number for that element. The rule tests the
//     value there and every value below it (each element of an array, each
//     member of an object). Keys holding a dot cannot be named; leave the
//     path out to test every value.
//   - message: the error the client sees (default: `blocked by guard rule
//     "<name>"`).
//
// And exactly one matcher:
//
//   - regex: RE2, blocks a value it finds a match in (anchor with ^…$).
//   - glob: path.Match over the whole value.
//   - pathTraversal: true, or {sensitiveRoots: [absolute paths]}: blocks a
//     `..` path segment, also percent-encoded (up to three times), as %uXXXX,
//     overlong UTF-8 or full-width characters, with `\` separators, `..;`,
//     or Windows' trailing blanks; with sensitiveRoots, also an
//     absolute path at or below one of them (`/etc/shadow`, `//etc/./x`,
//     `file:///etc/hosts`; drive-letter roots without case).
//   - shellMetacharacters: true: blocks ; | & $( ` > < and line breaks.
//   - urlAllowList: [hosts]: blocks a value holding a URL whose host is not
//     listed (`*.example.com` allows the subdomains, not example.com
//     itself). The host is read as browsers read it: userinfo up to the last
//     `@` is dropped (http://example.com@evil.com is evil.com), `\` ends
//     the authority, tabs and line breaks are removed, escapes decoded,
//     case and a trailing dot ignored, and http, https, ws, wss and ftp
//     need no slashes (https:evil.com). Text without a URL passes.
//
// Strings are tested decoded, numbers as written; keys, booleans and null
// are not tested. Rules apply in config order and the first that blocks
// decides. Unknown keys, a rule with no matcher or two, bad patterns, paths
// and hosts are errors naming the rule and the key; New reports them all.
package guard
