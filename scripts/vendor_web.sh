#!/usr/bin/env bash
# Fetches the web page's third-party scripts (and the browser test's axe-core) from
# npm with `npm pack` and copies the built files into the tree. The output is
# committed: the page loads nothing from a CDN and CI runs offline. Re-run after
# changing a version below, then review the diff.
#
#   marked     MIT                      services/gateway/.../web/vendor/marked.umd.js
#   dompurify  MPL-2.0 OR Apache-2.0    services/gateway/.../web/vendor/purify.min.js
#   axe-core   MPL-2.0 (test tool only) tests/fixtures/axe/axe.min.js
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
MARKED=18.2.1
DOMPURIFY=3.4.18
AXE=4.14.1
web="$root/services/gateway/src/groundwire_gateway/web/vendor"
axe="$root/tests/fixtures/axe"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

unpack() {  # name version -> $tmp/name/package
  (cd "$tmp" && npm pack --silent "$1@$2" >/dev/null)
  mkdir -p "$tmp/$1"
  tar xzf "$tmp/$1-$2.tgz" -C "$tmp/$1"
}
unpack marked "$MARKED"
unpack dompurify "$DOMPURIFY"
unpack axe-core "$AXE"

mkdir -p "$web" "$axe"
cp "$tmp/marked/package/lib/marked.umd.js" "$web/marked.umd.js"
cp "$tmp/marked/package/LICENSE" "$web/LICENSE.marked"
cp "$tmp/dompurify/package/dist/purify.min.js" "$web/purify.min.js"
cp "$tmp/dompurify/package/LICENSE" "$web/LICENSE.dompurify"
cp "$tmp/axe-core/package/axe.min.js" "$axe/axe.min.js"
cp "$tmp/axe-core/package/LICENSE" "$axe/LICENSE"
# source maps are not shipped: the page must not ask for a file the gateway lacks
sed -i '/^\/\/# sourceMappingURL=/d' "$web/marked.umd.js" "$web/purify.min.js"
cat > "$web/LICENSES.md" <<NOTE
# Third-party scripts of the web page

Fetched from npm by \`scripts/vendor_web.sh\` (\`npm pack\`), copied unchanged except
for the removed source-map comment. Served by the gateway under /static/vendor/.

| File | Package | Version | Licence |
|---|---|---|---|
| marked.umd.js | marked | $MARKED | MIT (LICENSE.marked) |
| purify.min.js | dompurify | $DOMPURIFY | MPL-2.0 OR Apache-2.0, used under Apache-2.0 (LICENSE.dompurify) |
NOTE
cat > "$axe/README.md" <<NOTE
# axe-core $AXE (MPL-2.0, LICENSE)

The accessibility engine the browser tests inject into the page (tests only; never
served). Fetched from npm by \`scripts/vendor_web.sh\`, unchanged.
NOTE
echo "vendored marked $MARKED, dompurify $DOMPURIFY, axe-core $AXE"
