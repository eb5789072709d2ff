"""Builders for synthetic recordings, and a way to run the `cafe` command in-process."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER

# Stands for customer text: it must never appear in an error message.
CUSTOMER_TEXT = "CUSTOMER-CANARY: my name is Jo and I live at 1 Example Road"
SHA = "0" * 64


def header(**changes: Any) -> dict[str, Any]:
    base = {
        "format": "cafe-recording", "version": 1, "harness": "cafe test", "model": "test-model",
        "provider": "cafe.test", "recorded_at": "2026-01-01T00:00:00.000000Z", "seed": 7,
        "clock_origin_unix_nano": 1_700_000_000_000_000_000, "script": [CUSTOMER_TEXT],
        "decisions": [["approve", None]],
    }
    base.update(changes)
    return base


def request(content: str = CUSTOMER_TEXT) -> dict[str, Any]:
    return {
        "messages": [{"role": "system", "content": "You are a barista."},
                     {"role": "user", "content": content}],
        "tools": None, "temperature": 0.0, "tool_choice": None,
    }


def response(message: dict[str, Any] | None = None) -> dict[str, Any]:
    message = message or {"role": "assistant", "content": "Coming up: " + CUSTOMER_TEXT}
    return {
        "id": "resp-1", "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }


def call(number: int, **changes: Any) -> dict[str, Any]:
    base = {
        "call": number, "request": request(), "response": response(),
        "timing": {"start_unix_nano": 1_700_000_000_000_000_000 + number, "duration_ns": 1000},
    }
    base.update(changes)
    return base


def end(model_calls: int, **changes: Any) -> dict[str, Any]:
    base = {"stop_reason": "answered", "model_calls": model_calls, "transcript_sha256": SHA}
    base.update(changes)
    return {"end": base}


def dump(*objects: Any) -> bytes:
    return b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objects)


def valid_bytes(calls: int = 2, ending: bool = True) -> bytes:
    lines = [header(), *(call(n) for n in range(1, calls + 1))]
    return dump(*lines, *([end(calls)] if ending else []))


def run_cli(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ=environ or {}, out=out, err=err, load_plugins=lambda warn: [COUNTER])
    return code, out.getvalue(), err.getvalue()


def snapshot(path: Path) -> tuple[bytes, int, int]:
    stat = path.stat()
    return path.read_bytes(), stat.st_mtime_ns, stat.st_mode


def identical(a: Any, b: Any) -> bool:
    """Equal with the same type at every position: 1 is not 1.0, key order counts, -0.0 is
    not 0.0, and a NaN matches a NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(identical, a, b))
    if isinstance(a, float):
        return (a == b and math.copysign(1, a) == math.copysign(1, b)) or (a != a and b != b)
    return bool(a == b)


# Sets a file-size limit (and ignores SIGXFSZ, so a write past it fails with EFBIG) in a
# fresh interpreter that then becomes the command. A `preexec_fn` would run Python in the
# forked child of a threaded pytest, where an at-fork hook can wait forever on a lock that
# another thread held at the fork.
_LIMIT_THEN_EXEC = (
    "import os, resource, signal, sys; "
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "limit = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def size_limited(limit_bytes: int, argv: list[str]) -> list[str]:
    """`argv` run under a file-size limit of `limit_bytes`; its first item is an absolute path."""
    return [argv[0], "-c", _LIMIT_THEN_EXEC, str(limit_bytes), *argv]
