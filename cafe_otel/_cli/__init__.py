"""The `cafe` CLI plugin: telemetry flags, the telemetry line and the demo."""
