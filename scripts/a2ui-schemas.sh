#!/bin/sh
# Copies the official A2UI v0.9 schemas and basic-catalog examples from the
# npm package @a2ui/web_core into dialect/a2ui. Usage: scripts/a2ui-schemas.sh [VERSION]
set -eu
version=${1:-0.11.0}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack "@a2ui/web_core@$version" >/dev/null && tar -xzf a2ui-web_core-*.tgz)
src=$tmp/package/src/v0_9/schemas
dst=$root/dialect/a2ui
cp "$src/server_to_client.json" "$src/client_to_server.json" "$src/common_types.json" "$dst/schemas/v0_9/"
cp "$src/catalogs/basic/catalog.json" "$dst/schemas/v0_9/basic_catalog.json"
rm -f "$dst"/testdata/examples/*.json
cp "$src"/catalogs/basic/examples/*.json "$dst/testdata/examples/"
(cd "$dst/schemas/v0_9" && sha256sum *.json)
