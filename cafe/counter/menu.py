"""The café's menu: prices, allergens, stations, and what is 86'd today.

Prices are held in cents so that totals never pick up float noise; they are shown in EUR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class MenuItem:
    name: str
    price_cents: int
    allergens: tuple[str, ...]
    station: str

    @property
    def price_eur(self) -> float:
        return self.price_cents / 100


def _item(name: str, cents: int, allergens: tuple[str, ...], station: str) -> MenuItem:
    return MenuItem(name=name, price_cents=cents, allergens=allergens, station=station)


MENU: Mapping[str, MenuItem] = {
    item.name: item
    for item in (
        _item("latte", 160, ("milk",), "bar"),
        _item("espresso", 130, (), "bar"),
        _item("iced latte", 280, ("milk",), "bar"),
        _item("tomato toast", 240, ("gluten",), "kitchen"),
        _item("cheese omelette", 320, ("egg",), "kitchen"),
        _item("croissant", 190, ("gluten", "milk", "egg"), "pastry"),
        _item("chocolate croissant", 210, ("gluten", "milk", "egg"), "pastry"),
        _item("orange juice", 250, (), "bar"),
    )
}

# Unavailable today; ordering one is refused with the closest alternative named.
EIGHTY_SIXED: frozenset[str] = frozenset({"cheese omelette"})

# The closest thing we can still make, per station and spirit of the dish.
ALTERNATIVES: Mapping[str, str] = {"cheese omelette": "tomato toast"}

KNOWN_ALLERGENS: frozenset[str] = frozenset(
    allergen for item in MENU.values() for allergen in item.allergens
) | {"nuts", "soy", "fish"}


def total_cents(items: Iterable[str]) -> int:
    """Sum of menu prices; the caller has already checked every name is on the menu."""
    return sum(MENU[name].price_cents for name in items)


def cents_to_eur(cents: int) -> float:
    return round(cents / 100, 2)


def items_named_in(text: str) -> list[str]:
    """Menu items a free-text line mentions, longest names first so that
    "chocolate croissant" is not also read as "croissant"."""
    remaining = text.lower()
    found: list[tuple[int, str]] = []
    for name in sorted(MENU, key=len, reverse=True):
        position = remaining.find(name)
        if position >= 0:
            found.append((position, name))
            remaining = remaining.replace(name, " " * len(name))
    return [name for _, name in sorted(found)]
