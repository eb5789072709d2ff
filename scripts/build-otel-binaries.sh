#!/usr/bin/env bash
# Build the two real programs the end-to-end tests run, from official Go modules:
#   otelcol-cafe  the Collector described by collector-config/manifest.yaml (OCB)
#   jaeger        Jaeger v2, pinned in tools/jaeger/go.mod
# into ${CAFE_OTEL_BIN_CACHE:-$HOME/.cache/cafe-otel/bin}/<key>/, where <key> hashes
# the inputs (manifest, tools/jaeger/go.mod + go.sum, `go version`). A matching
# key is reused without building. The tests compute the same key and run
# <cache>/<key>/{otelcol-cafe,jaeger} (otelstack/binaries.py), so checkouts of
# different manifests on one machine each run their own build. <cache>/current
# -> <key> (the last one built) is for people and for machines without Go.
#
# Needs only Go and the Go module proxy. Go's own module and build caches are
# left where they are (GOMODCACHE, GOCACHE): a rebuild after a key change
# mostly relinks.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
manifest="$root/collector-config/manifest.yaml"
jaeger_mod="$root/tools/jaeger"
cache="${CAFE_OTEL_BIN_CACHE:-$HOME/.cache/cafe-otel/bin}"

if ! command -v go >/dev/null 2>&1; then
    echo "build-otel-binaries: 'go' not found on PATH." >&2
    echo "Install Go 1.26 or newer (https://go.dev/dl/; the Collector v0.161.0 modules need it) and re-run;" >&2
    echo "the end-to-end tests (pytest -m e2e) need the binaries it builds." >&2
    exit 127
fi

# The builder must be the same release as the components it assembles; take it
# from the manifest so there is one place to bump.
ocb_version=$(sed -n 's|.*go.opentelemetry.io/collector/receiver/otlpreceiver \(v[0-9.]*\).*|\1|p' "$manifest")
if [[ -z "$ocb_version" ]]; then
    echo "build-otel-binaries: cannot read the otlpreceiver version from $manifest" >&2
    exit 1
fi

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
key=$({
    cat "$manifest" "$jaeger_mod/go.mod" "$jaeger_mod/go.sum"
    go version
} | sha256 | cut -c1-16)
dest="$cache/$key"
mkdir -p "$cache"

link_current() {
    # -n: replace the link itself, not create one inside the directory it points to.
    ln -sfn "$key" "$cache/current"
    touch "$dest" # newest-used first when old builds are pruned below
    echo "binaries: $cache/current/otelcol-cafe"
    echo "          $cache/current/jaeger"
}

if [[ -x "$dest/otelcol-cafe" && -x "$dest/jaeger" ]]; then
    echo "reusing $dest (key $key)"
    link_current
    exit 0
fi

# One build at a time per cache (when flock exists), so the cleanup of stale
# temporary directories below never removes a build that is still running.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.lock"
    flock 9
    if [[ -x "$dest/otelcol-cafe" && -x "$dest/jaeger" ]]; then
        echo "reusing $dest (built by a concurrent run)"
        link_current
        exit 0
    fi
    rm -rf "$cache"/.tmp-*
fi

# Build into a temporary directory and rename it into place at the end: a build
# that is killed halfway leaves only a .tmp-* directory, never a <key> directory.
tmp=$(mktemp -d "$cache/.tmp-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out" "$tmp/ocb/_build"

now() { date +%s; }
t0=$(now)
echo "building in $tmp (key $key, $(go version))"

# Fetch Jaeger's modules (network) while the collector compiles (CPU); on a
# cold machine this overlaps a minute or more. Go locks its module cache.
(cd "$jaeger_mod" && go mod download) >"$tmp/jaeger-download.log" 2>&1 &
download_pid=$!

echo "== otelcol-cafe: OCB $ocb_version from $manifest"
t=$(now)
cp "$manifest" "$tmp/ocb/manifest.yaml"
# dist.output_path is relative to the working directory; the builder does not
# create missing parents, hence _build above.
# TMPDIR: the builder leaves an empty otelcol-distribution* directory behind in
# it on every run; inside $tmp it goes away with the rest.
(cd "$tmp/ocb" && TMPDIR="$tmp" go run "go.opentelemetry.io/collector/cmd/builder@$ocb_version" --config=manifest.yaml)
mv "$tmp/ocb/_build/otelcol-cafe/otelcol-cafe" "$tmp/out/otelcol-cafe"
echo "   otelcol-cafe built in $(($(now) - t))s"

echo "== jaeger: from $jaeger_mod/go.mod"
t=$(now)
if ! wait "$download_pid"; then
    cat "$tmp/jaeger-download.log" >&2
    echo "build-otel-binaries: downloading Jaeger's modules failed" >&2
    exit 1
fi
# -mod=readonly: build exactly what go.mod/go.sum pin, never update them.
(cd "$jaeger_mod" && go build -mod=readonly -o "$tmp/out/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
echo "   jaeger built in $(($(now) - t))s"

"$tmp/out/otelcol-cafe" --version
{
    echo "key=$key"
    echo "go=$(go version)"
    echo "builder=$ocb_version"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$tmp/out/BUILDINFO"

if [[ -e "$dest" ]]; then
    echo "reusing $dest (appeared while building; discarding this build)"
else
    mv "$tmp/out" "$dest"
fi
link_current
# Keep the three newest builds (~160 MB each): enough to switch branches back
# and forth without rebuilding, without growing forever.
ls -1dt "$cache"/[0-9a-f]*/ 2>/dev/null | tail -n +4 | while read -r old; do
    echo "removing old build $old"
    rm -rf "$old"
done
echo "total build time $(($(now) - t0))s"
