#!/usr/bin/env bash
# Proves the product works without its worked example: a copy of the checkout with the café
# (cafe/counter, cafe_otel/_counter) and every test that uses it deleted, type-checked and
# tested. The installed entry points still name the example's modules; the product leaves
# out a registration whose package is not there, as it must for a user who deletes it.
# (A sitecustomize.py at the copy's root keeps the editable install's finder out.)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
top=$(mktemp -d "${TMPDIR:-/tmp}/cafe-without-example.XXXXXX")
trap 'rm -rf "$top"' EXIT
work="$top/checkout"
mkdir "$work"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work"
# The installed editable finder would still find the example's modules in this checkout: the
# copy's Python leaves it out, so nothing but the copy is imported.
cat > "$work/sitecustomize.py" <<'PY'
import sys

sys.meta_path[:] = [finder for finder in sys.meta_path
                    if not getattr(finder, "__module__", "").startswith("__editable__")]
PY
# The pinned conventions the conformance tests read sit beside the checkout, as here.
if [ -d ../shared ]; then ln -s "$(cd ../shared && pwd)" "$top/shared"; fi
rm -rf "$work/cafe/counter" "$work/cafe_otel/_counter" "$work/tests/counter"
# The example's tests: every test module that imports it, or imports a test module that does.
"$VENV/bin/python" - "$work" <<'PY'
import pathlib, re, sys

root = pathlib.Path(sys.argv[1])
gone = ["cafe.counter", "cafe_otel._counter", "tests.counter"]
SPELT = re.compile(r"from cafe import (?:[\w, ]*\b)?counter\b|from cafe_otel import (?:[\w, ]*\b)?_counter\b")
RELATIVE = re.compile(r"^\s*from \.([A-Za-z_][\w.]*) import", re.M)


def imports_gone(path: pathlib.Path, pattern: re.Pattern[str]) -> bool:
    text = path.read_text(encoding="utf-8")
    package = ".".join(path.relative_to(root).parent.parts)
    return pattern.search(text) is not None or SPELT.search(text) is not None or any(f"{package}.{name}" in gone for name in RELATIVE.findall(text))


while True:
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(name) for name in gone) + r")\b")
    found = [path for path in (root / "tests").rglob("*.py") if imports_gone(path, pattern)]
    if not found:
        break
    for path in found:
        gone.append(".".join(path.relative_to(root).with_suffix("").parts))
        path.unlink()
PY
echo "without the example: $(find "$work/tests" -name 'test_*.py' | wc -l) test modules remain"
cd "$work"
PYTHONPATH="$work" "$OLDPWD/$VENV/bin/mypy" --no-incremental cafe cafe_otel
PYTHONPATH="$work" "$OLDPWD/$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not e2e" tests "$@"
