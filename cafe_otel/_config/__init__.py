"""How telemetry settings are read: every variable's name (`variables`), the ASCII-only
number forms (`numbers`) and the one per-signal OTLP resolver (`signal`). Private: the
public readers are `cafe_otel._config.settings` and `cafe_otel._config.metrics`."""
