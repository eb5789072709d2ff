"""The built-in shift: the seed lesson's two customer lines and a customer who approves once."""

DEFAULT_SCRIPT: tuple[str, ...] = ("A latte and a chocolate croissant, please.", "Nothing else, thanks.")
DEFAULT_DECISIONS: tuple[tuple[str, None], ...] = (("approve", None),)
