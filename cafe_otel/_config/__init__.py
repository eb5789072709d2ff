"""How telemetry settings are read: every variable's name (`variables`), the ASCII-only
number forms (`numbers`) and the one per-signal OTLP resolver (`signal`). Private: the
public readers are `cafe_otel.settings` and `cafe_otel.metric_settings`."""
