"""What a loaded 2-core machine may add to a bounded wait in a test: a thread's wake-up, a
join, a scheduler that is busy elsewhere. A test that shows a call is bounded asserts that it
returned within its bound plus this slack, against a hang far longer than both: a slow moment
cannot fail it, and a call that waited out the hang still does."""

SCHEDULING_SLACK = 2.0
