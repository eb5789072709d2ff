"""Offline telemetry: spans from a recording, golden files and OTLP bytes."""
