"""Our pinned attribute names against the installed semantic-conventions package."""

from __future__ import annotations

import warnings

from cafe_otel import semconv as sc


def _installed():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai
        from opentelemetry.semconv.attributes import error_attributes, server_attributes

        return genai, error_attributes, server_attributes


def test_genai_names_match_the_installed_conventions():
    genai, error_attributes, server_attributes = _installed()
    ours = {name: value for name, value in vars(sc).items() if name.startswith("GEN_AI_")}
    assert len(ours) >= 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, value in ours.items():
            assert getattr(genai, name) == value, name
    assert error_attributes.ERROR_TYPE == sc.ERROR_TYPE
    assert server_attributes.SERVER_ADDRESS == sc.SERVER_ADDRESS
    assert server_attributes.SERVER_PORT == sc.SERVER_PORT


def test_operation_and_tool_type_values_match():
    genai, *_ = _installed()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ops = genai.GenAiOperationNameValues
        assert ops.CHAT.value == sc.OP_CHAT
        assert ops.INVOKE_AGENT.value == sc.OP_INVOKE_AGENT
        assert ops.EXECUTE_TOOL.value == sc.OP_EXECUTE_TOOL


def test_pinned_version_and_schema_url():
    assert sc.GENAI_SEMCONV_VERSION == "1.41.1"
    assert sc.SCHEMA_URL == "https://opentelemetry.io/schemas/1.41.1"


def test_the_allowlist_holds_no_content_attribute_and_our_keys_are_namespaced():
    assert not (sc.METADATA_ALLOWLIST & sc.CONTENT_ATTRIBUTES)
    assert "exception.message" not in sc.METADATA_ALLOWLIST
    assert "exception.stacktrace" not in sc.METADATA_ALLOWLIST
    ours = [value for name, value in vars(sc).items() if name.startswith("CAFE_") and isinstance(value, str)]
    assert ours and all(value.startswith("cafe.") for value in ours)
