"""The café example's OpenTelemetry side: `cafe demo` (one shift told as a story) and `cafe
golden` (a replay's OTLP bytes pinned beside its recording). It lives here because `cafe`
never imports OpenTelemetry; like `cafe.counter`, the product works without it."""
