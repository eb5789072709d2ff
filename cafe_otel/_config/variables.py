"""Every `OTEL_*` and `CAFE_*` variable cafe_otel reads, named once.

The OTLP exporter's settings exist once in general and once per signal
(`OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`,
`OTEL_EXPORTER_OTLP_METRICS_TIMEOUT`): `otlp_variable(setting, signal)` spells them, so a
signal's name and the general one cannot drift apart.
"""

from __future__ import annotations

from typing import Literal

Signal = Literal["traces", "metrics", "logs"]
SIGNALS: tuple[Signal, ...] = ("traces", "metrics", "logs")

# The OTLP exporter's settings, each read per signal first, then in general.
ENDPOINT = "ENDPOINT"
PROTOCOL = "PROTOCOL"
HEADERS = "HEADERS"
TIMEOUT = "TIMEOUT"
COMPRESSION = "COMPRESSION"
CERTIFICATE = "CERTIFICATE"
CLIENT_KEY = "CLIENT_KEY"
CLIENT_CERTIFICATE = "CLIENT_CERTIFICATE"
INSECURE = "INSECURE"
TLS_FILES = (CERTIFICATE, CLIENT_KEY, CLIENT_CERTIFICATE)


def otlp_variable(setting: str, signal: Signal | None = None) -> str:
    """`OTEL_EXPORTER_OTLP_{SIGNAL_}{SETTING}`: the signal's own variable, or the general one."""
    return f"OTEL_EXPORTER_OTLP_{signal.upper()}_{setting}" if signal else f"OTEL_EXPORTER_OTLP_{setting}"


def otlp_variables(setting: str, signal: Signal) -> tuple[str, str]:
    """The signal's variable and the general one, in the order they are read."""
    return otlp_variable(setting, signal), otlp_variable(setting)


def otlp_pair_name(setting: str, signal: Signal) -> str:
    """How an error names the pair: `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`."""
    return f"OTEL_EXPORTER_OTLP_({signal.upper()}_){setting}"


ENDPOINT_VARIABLES = otlp_variables(ENDPOINT, "traces")  # either one turns span export on in the CLI

OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
OTEL_SDK_DISABLED = "OTEL_SDK_DISABLED"
OTEL_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
OTEL_METRICS_EXPORTER = "OTEL_METRICS_EXPORTER"
OTEL_TRACES_SAMPLER = "OTEL_TRACES_SAMPLER"
OTEL_TRACES_SAMPLER_ARG = "OTEL_TRACES_SAMPLER_ARG"
OTEL_BSP = "OTEL_BSP_"  # the batch span processor's variables' prefix
OTEL_BSP_MAX_QUEUE_SIZE = "OTEL_BSP_MAX_QUEUE_SIZE"
OTEL_BSP_MAX_EXPORT_BATCH_SIZE = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
OTEL_BSP_SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"
OTEL_METRIC_EXPORT_INTERVAL = "OTEL_METRIC_EXPORT_INTERVAL"
OTEL_METRIC_EXPORT_TIMEOUT = "OTEL_METRIC_EXPORT_TIMEOUT"
OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# The SDK's span limits -> the SpanLimits argument each sets.
SPAN_LIMIT_VARIABLES = {
    "OTEL_ATTRIBUTE_COUNT_LIMIT": "max_attributes",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "max_attribute_length",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "max_span_attributes",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "max_span_attribute_length",
    "OTEL_SPAN_EVENT_COUNT_LIMIT": "max_events",
    "OTEL_SPAN_LINK_COUNT_LIMIT": "max_links",
    "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "max_event_attributes",
    "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT": "max_link_attributes",
}
# The one limit the SDK reads from os.environ when `opentelemetry.sdk.trace` is imported.
SDK_IMPORT_LIMIT = "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"

# Which configurator `opentelemetry-instrument` loads (`cafe_otel.instrumentation.CafeDistro`).
OTEL_PYTHON_CONFIGURATOR = "OTEL_PYTHON_CONFIGURATOR"

# The Python SDK's own (experimental) credential providers, refused (cafe_otel._config.tls).
CREDENTIAL_PROVIDER_VARIABLES = tuple(f"OTEL_PYTHON_EXPORTER_OTLP_{transport}_{signal}CREDENTIAL_PROVIDER"
                                      for transport in ("HTTP", "GRPC") for signal in ("", "TRACES_", "METRICS_"))

# The shape tables ("package.module:TABLE", comma-separated) of a program's own attribute keys:
# how a program under `opentelemetry-instrument`, which never calls configure(), declares them.
OTEL_PYTHON_CAFE_SHAPES = "OTEL_PYTHON_CAFE_SHAPES"

CAFE_JAEGER_URL = "CAFE_JAEGER_URL"
CAFE_DEBUG = "CAFE_DEBUG"
# cafe's own (`cafe.privacy.ENV_PATTERNS`): the extra secret patterns content is scrubbed with.
CAFE_SCRUB_PATTERNS = "CAFE_SCRUB_PATTERNS"
# gRPC's core reads it once, when `grpc` is first imported (`cafe_otel._cli.plugin`).
GRPC_VERBOSITY = "GRPC_VERBOSITY"

OTLP_SETTINGS = (ENDPOINT, PROTOCOL, HEADERS, TIMEOUT, COMPRESSION, *TLS_FILES, INSECURE)

# Every name `cafe_otel._config.read_environ` takes from an environment, each once.
KNOWN_VARIABLES: frozenset[str] = frozenset((
    *(otlp_variable(setting, signal) for setting in OTLP_SETTINGS for signal in (None, *SIGNALS)),
    OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER,
    OTEL_METRICS_EXPORTER, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_MAX_QUEUE_SIZE,
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_SCHEDULE_DELAY, OTEL_METRIC_EXPORT_INTERVAL,
    OTEL_METRIC_EXPORT_TIMEOUT, OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE,
    OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
    *SPAN_LIMIT_VARIABLES, *CREDENTIAL_PROVIDER_VARIABLES, OTEL_PYTHON_CONFIGURATOR,
    CAFE_JAEGER_URL, CAFE_DEBUG, CAFE_SCRUB_PATTERNS, OTEL_PYTHON_CAFE_SHAPES,
))
