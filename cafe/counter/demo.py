"""The built-in shift: the seed lesson's two customer lines and a customer who approves once."""

DEFAULT_SCRIPT: tuple[str, ...] = ("A latte and a chocolate croissant, please.", "Nothing else, thanks.")
DEFAULT_DECISIONS: tuple[tuple[str, None], ...] = (("approve", None),)

# The demo's story (`cafe demo`, played by `cafe.counter.clients.story.StoryClient`): an allergy
# question, then an order for a table that the customer approves once.
STORY_SCRIPT: tuple[str, ...] = (
    "Hi! I'm allergic to egg. Is the tomato toast safe for me?",
    "Lovely. A tomato toast and a latte for table 4, please.",
)
STORY_DECISIONS: tuple[tuple[str, None], ...] = (("approve", None),)
