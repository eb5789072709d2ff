"""The shape table: every allowlisted key has one, real metadata fits, free text does not,
and docs/privacy.md carries the table as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe_otel import semconv as sc
from cafe_otel._privacy.shapes import CONTENT, SHAPES, SPAN_NAME, TRACESTATE_OT, markdown_table

from .metadata_examples import LEGIT, MARK, METADATA_KEYS, MORE_LEGIT, free_text

ROOT = Path(__file__).resolve().parents[2]


def test_every_key_that_may_leave_has_a_shape_and_only_those():
    assert set(SHAPES) == sc.METADATA_ALLOWLIST | sc.CONTENT_ATTRIBUTES | sc.METRIC_ATTRIBUTES
    assert {key for key, shape in SHAPES.items() if shape.kind == CONTENT} == sc.CONTENT_ATTRIBUTES
    assert set(METADATA_KEYS) == sc.METADATA_ALLOWLIST  # the examples cover every key


@pytest.mark.parametrize(("key", "value"), [*LEGIT.items(), *MORE_LEGIT])
def test_real_metadata_fits_its_shape(key, value):
    assert SHAPES[key].fits(value)


@settings(max_examples=100, deadline=None)
@given(key=st.sampled_from(METADATA_KEYS), text=free_text())
def test_free_text_fits_no_metadata_shape(key, text):
    assert not SHAPES[key].fits(text)
    assert not SHAPES[key].fits((text,))


@pytest.mark.parametrize("key", METADATA_KEYS)
def test_a_long_single_word_fits_no_metadata_shape(key):
    assert not SHAPES[key].fits(MARK * 30)  # 270 characters without a space


@pytest.mark.parametrize("value", [True, -1, 2**40, float("nan"), None, b"bytes", ("stop",) * 33, ()])
def test_wrong_types_and_ranges_do_not_fit(value):
    for key in ("gen_ai.usage.input_tokens", "server.port", "gen_ai.response.finish_reasons",
                "gen_ai.request.temperature"):
        assert not SHAPES[key].fits(value)


def test_span_names_and_the_trace_state():
    for name in ("invoke_agent cafe-counter", "chat gpt-4o-mini", "execute_tool price_check", "turn 1", "setup",
                 "POST /v1/chat/completions", "GET /items/{id}"):
        assert SPAN_NAME.fits(name), name
    for name in (f"Summarise: {MARK} my order", "GET /search?q=latte", "a b c", "x" * 65):
        assert not SPAN_NAME.fits(name), name
    assert TRACESTATE_OT.fits("th:8") and TRACESTATE_OT.fits("th:c;rv:0123456789abcd")
    assert not TRACESTATE_OT.fits(f"th:{MARK}")


def test_the_privacy_doc_carries_the_shape_table_as_it_is():
    text = (ROOT / "docs" / "privacy.md").read_text(encoding="utf-8")
    table = markdown_table()
    assert table in text, f"docs/privacy.md is stale; the table is now:\n{table}"
    assert text.count("| field or attribute | what may leave |") == 1


@pytest.mark.parametrize("doc", ["README.md", *(f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md"))
                                          if path.name != "privacy.md")])
def test_no_other_doc_repeats_the_table(doc):
    assert "| field or attribute | what may leave |" not in (ROOT / doc).read_text(encoding="utf-8")


def test_the_readme_links_the_privacy_doc_for_the_table():
    assert "docs/privacy.md" in (ROOT / "README.md").read_text(encoding="utf-8")
