#!/usr/bin/env bash
# Runs Orrery's whole test suite: formatting and vet checks, then every Go
# test, including the interop tests that drive the kernel with the official
# AG-UI client (their npm packages are installed here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== npm packages for the AG-UI interop tests"
if [ ! -d interop/node_modules ] || [ interop/package-lock.json -nt interop/node_modules ]; then
  (cd interop && npm ci --no-audit --no-fund --loglevel=error)
fi

echo "== npm packages for the A2UI renderer test"
if [ ! -d interop/a2ui/node_modules ] || [ interop/a2ui/package-lock.json -nt interop/a2ui/node_modules ]; then
  npm ci --prefix interop/a2ui --no-audit --no-fund --loglevel=error
fi

echo "== npm packages for the ACP test agent and editor"
if [ ! -d agent/acp/testdata/agent/node_modules ] || [ agent/acp/testdata/agent/package-lock.json -nt agent/acp/testdata/agent/node_modules ]; then
  npm ci --prefix agent/acp/testdata/agent --no-audit --no-fund --loglevel=error
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './interop/node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change these files (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test"
go test -race -timeout 20m ./... "$@"
