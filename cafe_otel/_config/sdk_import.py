"""Importing this module imports the OTel SDK through `import_sdk`, the guard against the one
span limit the SDK reads from `os.environ` as it is imported
(`cafe_otel._config.environment`). An entry point whose module needs the SDK imports this
first (the distro's: `opentelemetry-instrument` would otherwise log the SDK's ValueError as
a traceback and load no distro), so that a bad value is the configuration's one named error."""

from cafe_otel._config.environment import import_sdk

import_sdk()
