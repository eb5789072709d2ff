"""The domain: menu, 86'd item, tool schemas, and argument checking in three stages."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from cafe.counter import EIGHTY_SIXED, MENU, SYSTEM_PROMPT, TOOL_SCHEMAS
from cafe.counter.menu import ALTERNATIVES, items_named_in, total_cents
from cafe.counter.orders import Ticket
from cafe.counter.tool_arguments import check_arguments
from cafe.counter.tools import parameters_of

from .helpers import hypothesis_home

# The menu of the harness note: name -> (EUR, allergens, station).
SPEC_MENU = {
    "latte": ("1.60", {"milk"}, "bar"),
    "espresso": ("1.30", set(), "bar"),
    "iced latte": ("2.80", {"milk"}, "bar"),
    "tomato toast": ("2.40", {"gluten"}, "kitchen"),
    "cheese omelette": ("3.20", {"egg"}, "kitchen"),
    "croissant": ("1.90", {"gluten", "milk", "egg"}, "pastry"),
    "chocolate croissant": ("2.10", {"gluten", "milk", "egg"}, "pastry"),
    "orange juice": ("2.50", set(), "bar"),
}
TOOLS = {"price_check", "check_allergens", "propose_order", "fire_ticket", "close_check"}


def test_menu_matches_the_spec():
    assert set(MENU) == set(SPEC_MENU)
    for name, (eur, allergens, station) in SPEC_MENU.items():
        item = MENU[name]
        assert f"{item.price_eur:.2f}" == eur, name
        assert item.price_cents == round(float(eur) * 100), name
        assert set(item.allergens) == allergens, name
        assert item.station == station, name


def test_cheese_omelette_is_86d_with_an_alternative_on_the_menu():
    assert {"cheese omelette"} == EIGHTY_SIXED
    assert ALTERNATIVES["cheese omelette"] in MENU
    assert ALTERNATIVES["cheese omelette"] not in EIGHTY_SIXED


def test_system_prompt_states_the_shift_rules():
    prompt = SYSTEM_PROMPT.lower()
    for needle in ("check_allergens", "price", "propose_order", "fire_ticket", "86'd", "alternative"):
        assert needle in prompt


def test_ticket_total_is_recomputed_from_the_menu_in_cents():
    items = ["croissant", "latte", "espresso", "orange juice"]
    ticket = Ticket.build(3, items, allergen_checked=False)
    expected_cents = sum(round(float(SPEC_MENU[i][0]) * 100) for i in items)
    assert ticket.total_eur == expected_cents / 100
    assert ticket.as_dict() == {
        "table": 3, "items": items, "total_eur": expected_cents / 100, "allergen_checked": False,
    }
    assert f"{expected_cents / 100:.2f}" in ticket.render()
    assert total_cents(["latte", "latte"]) == 2 * MENU["latte"].price_cents


def test_items_named_in_prefers_longest_names_and_keeps_order():
    assert items_named_in("A latte and a chocolate croissant, please.") == ["latte", "chocolate croissant"]
    assert items_named_in("an ICED LATTE then a croissant") == ["iced latte", "croissant"]
    assert items_named_in("nothing else, thanks") == []


# --- tool schemas ---------------------------------------------------------------------

def test_five_function_tools_with_strict_object_schemas():
    names = [tool["function"]["name"] for tool in TOOL_SCHEMAS]
    assert sorted(names) == sorted(TOOLS)
    for tool in TOOL_SCHEMAS:
        assert tool["type"] == "function"
        params = tool["function"]["parameters"]
        Draft202012Validator.check_schema(params)
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert sorted(params["required"]) == sorted(params["properties"])
        assert tool["function"]["description"]
    assert set(parameters_of("price_check")["properties"]) == {"item"}
    assert set(parameters_of("check_allergens")["properties"]) == {"item", "allergen"}
    assert set(parameters_of("propose_order")["properties"]) == {"items", "table"}
    assert set(parameters_of("fire_ticket")["properties"]) == {"items", "table"}
    assert set(parameters_of("close_check")["properties"]) == {"table"}
    with pytest.raises(KeyError):
        parameters_of("refund")


@pytest.mark.parametrize("tool", ["propose_order", "fire_ticket"])
@pytest.mark.parametrize(
    "arguments",
    [
        {"items": ["latte"], "table": True},  # a bool is not a table number
        {"items": ["latte"], "table": False},
        {"items": [], "table": 2},  # empty order
        {"items": ["latte"], "table": 2, "total_eur": 0.01},  # a model cannot set a price
        {"items": ["latte"]},  # table missing
        {"items": "latte", "table": 2},
        {"items": ["latte"], "table": "2"},
        {"items": ["latte"], "table": 0},
        {"items": [""], "table": 2},
    ],
)
def test_order_schemas_reject_bad_shapes(tool, arguments):
    validator = Draft202012Validator(parameters_of(tool))
    assert not validator.is_valid(arguments)
    checked = check_arguments(tool, json.dumps(arguments))
    assert not checked.ok
    assert checked.stage == "shape"


def test_order_schema_accepts_a_good_order():
    assert Draft202012Validator(parameters_of("fire_ticket")).is_valid({"items": ["latte"], "table": 7})
    assert check_arguments("fire_ticket", json.dumps({"items": ["latte"], "table": 7})).ok


# --- argument checking: parse, shape, meaning ------------------------------------------

def test_invalid_json_is_a_parse_problem():
    checked = check_arguments("price_check", '{"item": "latte"')
    assert (checked.ok, checked.stage) == (False, "parse")
    assert len(checked.problems) == 1
    assert "not valid JSON" in checked.problems[0]


def test_json_that_is_not_an_object_is_a_parse_problem():
    checked = check_arguments("price_check", '["latte"]')
    assert checked.stage == "parse"
    assert checked.problems == ["arguments must be a JSON object, got list"]


def test_unknown_tool_names_the_tool_and_the_real_ones():
    checked = check_arguments("refund_customer", "{}")
    assert checked.stage == "parse"
    [problem] = checked.problems
    assert "'refund_customer'" in problem
    for name in TOOLS:
        assert name in problem


def test_every_failed_shape_constraint_is_named_with_its_field():
    checked = check_arguments(
        "propose_order", json.dumps({"items": [], "table": True, "note": "make it quick"})
    )
    assert checked.stage == "shape"
    assert len(checked.problems) == 3
    by_field = {problem.split(":")[0]: problem for problem in checked.problems}
    assert set(by_field) == {"arguments", "arguments.items", "arguments.table"}
    assert "'note'" in by_field["arguments"]
    assert "integer" in by_field["arguments.table"]
    assert "[]" in by_field["arguments.items"]


def test_missing_required_argument_is_named():
    checked = check_arguments("check_allergens", json.dumps({"item": "latte"}))
    assert checked.stage == "shape"
    assert any("'allergen'" in p for p in checked.problems)


def test_unknown_and_86d_items_are_meaning_problems_naming_each_item():
    checked = check_arguments(
        "propose_order", json.dumps({"items": ["latte", "mocha", "cheese omelette"], "table": 4})
    )
    assert checked.stage == "meaning"
    assert len(checked.problems) == 2
    mocha, omelette = checked.problems
    assert mocha.startswith("arguments.items[1]:") and "'mocha'" in mocha and "menu" in mocha
    assert omelette.startswith("arguments.items[2]:") and "86'd" in omelette
    assert repr(ALTERNATIVES["cheese omelette"]) in omelette


def test_a_whole_float_table_is_refused_as_not_a_whole_number():
    checked = check_arguments("close_check", json.dumps({"table": 3.0}))
    assert not checked.ok
    assert any(p.startswith("arguments.table:") for p in checked.problems)


def test_86d_item_may_be_asked_about_but_not_ordered():
    assert check_arguments("price_check", json.dumps({"item": "cheese omelette"})).ok
    assert check_arguments("check_allergens", json.dumps({"item": "cheese omelette", "allergen": "egg"})).ok
    assert not check_arguments("fire_ticket", json.dumps({"items": ["cheese omelette"], "table": 1})).ok


def test_single_item_tools_name_the_item_field():
    checked = check_arguments("price_check", json.dumps({"item": "Latte"}))
    assert checked.problems == ["arguments.item: 'Latte' is not an exact menu item name"]


def test_tool_arguments_that_are_not_a_string_are_a_parse_problem_not_a_crash():
    checked = check_arguments("price_check", {"item": "latte"})  # type: ignore[arg-type]
    assert not checked.ok
    assert checked.stage == "parse"


@pytest.fixture(scope="module", autouse=True)
def _hypothesis_home_in_a_temporary_directory(tmp_path_factory):
    """Hypothesis keeps caches in ./.hypothesis; these tests write only to temporary ones."""
    with hypothesis_home(tmp_path_factory.mktemp("hypothesis-home")):
        yield


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 120) | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(sorted(MENU)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["item", "items", "table", "allergen", "extra"]), inner, max_size=4
    ),
    max_leaves=10,
)


@settings(database=None, max_examples=300, deadline=None)
@given(tool=st.sampled_from([*sorted(TOOLS), "nope"]), value=_json_values, garble=st.booleans())
def test_checking_never_raises_and_ok_means_valid(tool, value, garble):
    raw = json.dumps(value)
    if garble:
        raw = raw[:-1]
    checked = check_arguments(tool, raw)
    assert checked.ok == (not checked.problems)
    assert checked.ok == (checked.stage == "passed")
    if checked.ok:
        arguments = checked.arguments
        assert Draft202012Validator(parameters_of(tool)).is_valid(arguments)
        for name in arguments.get("items", []):
            assert name in MENU and name not in EIGHTY_SIXED
        if "item" in arguments:
            assert arguments["item"] in MENU
        if "table" in arguments:
            assert type(arguments["table"]) is int and 1 <= arguments["table"] <= 99
