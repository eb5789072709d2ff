"""The benchmarks of issue 6 (five, and the import cost): `python -m bench`, `--smoke`, `--only N`.

Benchmarks, not tests: nothing here asserts a time. Each figure is measured side by side
with its baseline in the same run; see bench/README.md for what each one measures.
"""
