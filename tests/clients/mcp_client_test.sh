#!/usr/bin/env bash
# Runs mcp_client_test.mjs under node with the official MCP TypeScript SDK, installed from npm
# into BUILD_DIR/mcp-client (git-ignored) on first use.
#   mcp_client_test.sh SOURCE_DIR BUILD_DIR
# Exit 77 (ctest: skipped) when node or npm is missing or the npm registry cannot be reached,
# except under CI (CI set), where that is a failure.
set -euo pipefail
source_dir=$1
build_dir=$2
sdk_version=1.32.2
client_dir=$build_dir/mcp-client

skip() {
  if [[ -n "${CI:-}" ]]; then
    echo "mcp_client_test: $1 (a failure under CI)" >&2
    exit 1
  fi
  echo "mcp_client_test: skipped: $1" >&2
  exit 77
}

command -v node >/dev/null || skip "node is not installed (Debian: apt-get install nodejs)"
command -v npm >/dev/null || skip "npm is not installed (Debian: apt-get install npm)"

mkdir -p "$client_dir"
(
  # One install at a time: ctest -j may start this test beside another copy of it.
  flock 9
  installed=$client_dir/node_modules/@modelcontextprotocol/sdk/package.json
  if ! grep -q "\"version\": \"$sdk_version\"" "$installed" 2>/dev/null; then
    echo "mcp_client_test: npm install @modelcontextprotocol/sdk@$sdk_version" >&2
    if ! timeout 300 npm install --prefix "$client_dir" --no-audit --no-fund --no-save \
        --fetch-retries=1 --fetch-timeout=30000 \
        "@modelcontextprotocol/sdk@$sdk_version" >&2; then
      exit 3
    fi
  fi
) 9>"$client_dir/.lock" || {
  rc=$?
  [[ $rc == 3 ]] && skip "npm install @modelcontextprotocol/sdk failed (registry unreachable?)"
  exit $rc
}

# Beside the SDK, so that node resolves its imports from BUILD_DIR/mcp-client/node_modules.
cp "$source_dir/tests/clients/mcp_client_test.mjs" "$client_dir/"
SEXTANT_BIN=$build_dir/bin/sextant SEXTANT_SOURCE_DIR=$source_dir \
  exec node "$client_dir/mcp_client_test.mjs"
