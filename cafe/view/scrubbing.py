"""A recording as a page shows it (`scrubbed`, `shown_json`): they live in `cafe.privacy`, which
the recorder, the pages and `cafe export` share."""

from cafe.privacy import scrubbed, shown_json

__all__ = ["scrubbed", "shown_json"]
