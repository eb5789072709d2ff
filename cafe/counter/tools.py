"""The five tools the model may call, as OpenAI function-tool schemas.

The schemas are also what arguments are validated against before a tool runs, so they
are strict: no extra properties, integers that are not booleans, non-empty item lists.
"""

from __future__ import annotations

from typing import Any

PRICE_CHECK = "price_check"
CHECK_ALLERGENS = "check_allergens"
PROPOSE_ORDER = "propose_order"
FIRE_TICKET = "fire_ticket"
CLOSE_CHECK = "close_check"

_ITEM = {"type": "string", "minLength": 1, "description": "An exact menu item name."}
_ITEMS = {"type": "array", "items": _ITEM, "minItems": 1, "maxItems": 20}
_TABLE = {"type": "integer", "minimum": 1, "maximum": 99, "description": "Table number."}


def _tool(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": sorted(properties),
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool(PRICE_CHECK, "Price and availability of one menu item.", {"item": _ITEM}),
    _tool(
        CHECK_ALLERGENS,
        "Whether one menu item contains an allergen, from the menu data.",
        {"item": _ITEM, "allergen": {"type": "string", "minLength": 1}},
    ),
    _tool(
        PROPOSE_ORDER,
        "Draft an order and show it to the customer for approval. Fires nothing.",
        {"items": _ITEMS, "table": _TABLE},
    ),
    _tool(
        FIRE_TICKET,
        "Send an approved order to the kitchen. Irreversible; needs the customer's approval.",
        {"items": _ITEMS, "table": _TABLE},
    ),
    _tool(CLOSE_CHECK, "Close the bill for a table.", {"table": _TABLE}),
]

TOOL_NAMES: frozenset[str] = frozenset(tool["function"]["name"] for tool in TOOL_SCHEMAS)


def parameters_of(name: str) -> dict[str, Any]:
    for tool in TOOL_SCHEMAS:
        if tool["function"]["name"] == name:
            parameters: dict[str, Any] = tool["function"]["parameters"]
            return parameters
    raise KeyError(name)
