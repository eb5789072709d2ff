#!/usr/bin/env bash
# Proves the product works without its worked example: a copy of the checkout with the café
# (cafe/counter, cafe_otel/_counter) and every test that uses it deleted, type-checked and
# tested. The installed entry points still name the example's modules; the product leaves
# out a registration whose package is not there, as it must for a user who deletes it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
work=$(mktemp -d "${TMPDIR:-/tmp}/cafe-without-example.XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work"
rm -rf "$work/cafe/counter" "$work/cafe_otel/_counter" "$work/tests/counter"
# The example's tests: every test module that imports it.
grep -rlE --include='*.py' '(cafe\.counter|cafe_otel\._counter)\b' "$work/tests" | xargs -r rm -f
echo "without the example: $(find "$work/tests" -name 'test_*.py' | wc -l) test modules remain"
cd "$work"
PYTHONPATH="$work" "$OLDPWD/$VENV/bin/mypy" --no-incremental cafe cafe_otel
PYTHONPATH="$work" "$OLDPWD/$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not e2e" tests "$@"
