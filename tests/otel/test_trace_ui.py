"""CAFE_JAEGER_URL only shapes the trace notes on stdout, which end up in CI logs: a
user:password or a query string in it must not be printed, and a value that is not an
http(s) URL with a host is a configuration error before the shift, not a note nobody can open."""

from __future__ import annotations

import io

import pytest

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe_otel._cli.plugin import plugin
from tests.local_http import QuietHandler, serving


class _Accepting(QuietHandler):
    """An OTLP/HTTP receiver that takes everything: a trace note is printed for delivered spans."""

    def do_POST(self) -> None:
        self.read_body()
        self.answer(200, b"", "application/x-protobuf")


def _shift(jaeger: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with serving(_Accepting) as port:
        code = main(["shift", "--seed", "1", "--otlp-protocol", "http/protobuf", f"--otlp=http://127.0.0.1:{port}"],
                    environ={"CAFE_JAEGER_URL": jaeger}, out=out, err=err, load_plugins=lambda warn: [COUNTER, plugin])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("jaeger", "shown"), [
    ("http://admin:JAEGER-PASSWORD@127.0.0.1:16686", "http://127.0.0.1:16686"),
    ("http://127.0.0.1:16686/?token=JAEGER-TOKEN#frag", "http://127.0.0.1:16686"),
    ("HTTPS://[::1]:16686/jaeger/", "https://[::1]:16686/jaeger"),
])
def test_the_trace_note_shows_no_credentials_or_query(jaeger: str, shown: str) -> None:
    code, out, err = _shift(jaeger)
    assert code == 0, err
    notes = [line for line in out.splitlines() if line.startswith("trace: ")]
    assert len(notes) == 1
    trace_id = notes[0].split()[1]
    assert notes[0] == f"trace: {trace_id}  {shown}/trace/{trace_id}"
    assert "JAEGER-" not in out + err


@pytest.mark.parametrize("jaeger", ["not a url", "javascript:alert(1)", "http://127.0.0.1:16686/\x1b[2J", "http://"])
def test_a_jaeger_url_that_is_not_one_is_exit_20_before_the_shift(jaeger: str) -> None:
    code, out, err = _shift(jaeger)
    assert code == 20 and out == "" and err.count("\n") == 1
    assert err.startswith("cafe: error: CAFE_JAEGER_URL: ")
