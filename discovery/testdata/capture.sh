#!/usr/bin/env bash
# capture.sh writes the live tool lists of the npm servers the tests install
# (test/node/node_modules) to npm-tools.json, the real part of the evaluation
# catalog. Run from the repository root: discovery/testdata/capture.sh
# The client declares sampling, elicitation and roots, so that
# server-everything lists the tools it registers only for such clients.
set -euo pipefail
node_dir=test/node
out=discovery/testdata/npm-tools.json
caps='{"sampling":{},"elicitation":{},"roots":{}}'
list() { # $1 = server name, $2 = script under node_modules
	echo '[{"op":"listTools"}]' |
		node "$node_dir/client.mjs" --transport stdio --command node --arg "$node_dir/node_modules/$2" --arg stdio \
			--capabilities "$caps" 2>/dev/null |
		node -e '
let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
  const r = JSON.parse(s);
  const tools = r.steps[0].result.items.map(t => ({server: process.argv[1], ...t}));
  process.stdout.write(JSON.stringify(tools));
});' "$1"
}
everything=$(list everything @modelcontextprotocol/server-everything/dist/index.js)
memory=$(list memory @modelcontextprotocol/server-memory/dist/index.js)
node -e 'const a = JSON.parse(process.argv[1]), b = JSON.parse(process.argv[2]);
process.stdout.write(JSON.stringify([...a, ...b], null, 1) + "\n");' "$everything" "$memory" >"$out"
echo "wrote $out"
