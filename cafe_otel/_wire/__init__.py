"""The OpenTelemetry side of the wire: the observer that turns each model call heard there into
a GenAI span and its metrics, and the thread that builds them."""
