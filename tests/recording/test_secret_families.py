"""The credential families a secret scanner looks for by default, wherever they are glued
(after `_`, `-`, `.`, `/`, `=`, a quote, a JSON `\\n`, inside a URL, as a JSON key or value,
JSON-escaped), are scrubbed by the recorder, found by `check-recording` and hidden by the pages;
ordinary café text is left as it is. The patterns have one home, `cafe.privacy`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cafe.privacy import REDACTED, Scrubber
from cafe.recording import RecordingClient, load_recording
from cafe.recording.check import check_file
from tests.recording.helpers import run_cli

# Built from pieces, so that this file is not itself a set of keys to a scanner.
_BODY = "Kq7" + "2Zx9Wm4Rt8Yp3Ln6Bv1Cs5Df0Gh2"  # 31 characters of a key's body
_HEX = "9f86d081" + "884c7d659a2feaa0c55ad015"  # 32 hexadecimal digits
FAMILIES = {
    "openai project": "sk-" + "proj-" + _BODY,
    "openai service account": "sk-" + "svcacct-" + _BODY,
    "openai admin": "sk-" + "admin-" + _BODY,
    "anthropic": "sk-" + "ant-api03-" + _BODY + "-AA",
    "github classic": "ghp" + "_" + _BODY + "abcde",
    "github oauth": "gho" + "_" + _BODY + "abcde",
    "github app": "ghs" + "_" + _BODY + "abcde",
    "github user-to-server": "ghu" + "_" + _BODY + "abcde",
    "github refresh": "ghr" + "_" + _BODY + "abcde",
    "github fine-grained": "github" + "_pat_" + "11ABCDEFG0" + _BODY + "_" + _BODY + "xyz",
    "gitlab": "glpat" + "-" + _BODY[:20],
    "slack bot": "xoxb" + "-1234567890-0987654321-" + _BODY[:16],
    "slack user": "xoxp" + "-1234567890-0987654321-" + _BODY[:16],
    "aws access key id": "AKIA" + "Z7Q4MNB2XK5LW3PD",
    "aws temporary key id": "ASIA" + "Z7Q4MNB2XK5LW3PD",
    "google api key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "stripe secret": "sk" + "_live_" + _BODY[:24],
    "stripe restricted": "rk" + "_live_" + _BODY[:24],
    "hugging face": "hf" + "_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
    "npm": "npm" + "_" + _BODY + "abcde",
    "pypi": "pypi" + "-AgEIcHlwaS5vcmc" + _BODY + _BODY,
    "jwt": "eyJ" + "hbGciOiJIUzI1NiJ9" + ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0" + "." + _BODY,
    "groq": "gsk" + "_" + _BODY + _BODY[:21],
    "xai": "xai" + "-" + _BODY * 2 + _BODY[:18],
    "perplexity": "pplx" + "-" + _BODY + _BODY[:17],
    "replicate": "r8" + "_" + _BODY + "abcdef",
    "hugging face org": "api" + "_org_" + _BODY + "abc",
    "google oauth client secret": "GOCSPX" + "-" + _BODY[:28],
    "google oauth access token": "ya29" + "." + _BODY + _BODY,
    "azure ad client secret": "abc" + "8Q~" + _BODY[:31] + "Zx9",
    "alibaba": "LTAI" + _BODY[:20],
    "digitalocean": "dop" + "_v1_" + _HEX * 2,
    "vault": "hvs" + "." + _BODY + "AbCdEf",
    "terraform cloud": "abcdefgh123456" + ".atlasv1." + _BODY.lower() * 2,
    "twilio": "SK" + _HEX,
    "sendgrid": "SG" + "." + _BODY[:22] + "." + _BODY + _BODY[:12],
    "mailgun": "key" + "-" + _HEX,
    "brevo": "xkeysib" + "-" + _HEX * 2 + "-" + _BODY[:16],
    "shopify": "shpat" + "_" + _HEX,
    "stripe webhook": "whsec" + "_" + _BODY,
    "databricks": "dapi" + _HEX,
    "doppler": "dp" + ".pt." + _BODY + "abcdefghijkl",
    "grafana cloud": "glc" + "_" + _BODY + "abcd",
    "grafana service account": "glsa" + "_" + _BODY + "a" + "_" + _HEX[:8],
    "linear": "lin" + "_api_" + _BODY + "abcdefghi",
    "postman": "PMAK" + "-" + _HEX[:24] + "-" + _HEX + "ab",
    "sentry": "sntrys" + "_" + _BODY + _BODY,
    "new relic": "NRAK" + "-" + _BODY[:27],
    "planetscale": "pscale" + "_tkn_" + _BODY + "abcd",
    "pulumi": "pul" + "-" + _HEX + "abcdefab",
    "1password": "ops" + "_eyJ" + _BODY * 4,
    "square": "sq0atp" + "-" + _BODY[:22],
    "age": "AGE-SECRET" + "-KEY-1" + ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2)[:58],
    "dynatrace": "dt0c01" + "." + _BODY[:24] + "." + (_BODY * 3)[:64],
    "atlassian": "ATATT3" + _BODY * 4,
    "notion": "ntn" + "_" + "12345678901" + _BODY + "abcd",
}
# Where a key is glued in text: the issue's `deploy_sk-proj-...` and `token_ghp_...` among them.
GLUED = ["{}", "deploy_{}", "token_{}", "build-{}", "prod.{}", "keys/{}", "key={}", "'{}'", '"{}"', "({})",
         "https://api.example.com/v1/items?key={}&page=2", "https://api.example.com/{}/items",
         "first line\\n{}", "https://api.example.com/search?q=%22{}%22", "key%3D{}"]
# Assignments and headers whose value has no provider prefix: the name says it is a secret.
ASSIGNED = "live-value-Zx93Wm47"
ASSIGNMENTS = [
    f"export OPENAI_API_KEY={ASSIGNED}",
    f'export GITHUB_TOKEN="{ASSIGNED}"',
    f"DEPLOY_SECRET='{ASSIGNED}'",
    f"aws_secret_access_key = {ASSIGNED}",
    f"AWS_SECRET_ACCESS_KEY={ASSIGNED}",
    f"password={ASSIGNED}",
    f"db_password: {ASSIGNED}",
    f'{{"DB_PASSWORD": "{ASSIGNED}"}}',
    f'{{"stripe_secret": "{ASSIGNED}"}}',
    f"X-Auth-Token: {ASSIGNED}",
    f"Authorization: Bearer {ASSIGNED}",
    "curl -H 'Authorization: Basic bGl2ZS12YWx1ZS1aeDkzV200Nw=='",
    "send basic bGl2ZS12YWx1ZS1aeDkzV200Nw== to the till",
    f"https://admin:{ASSIGNED}@db.example.com/orders",
    f"os.environ['OPENAI_API_KEY'] = '{ASSIGNED}'",
    f'os.environ["ANTHROPIC_API_KEY"]="{ASSIGNED}"',
    f"OPENAI_API_KEY := {ASSIGNED}",
    f"api_key => '{ASSIGNED}'",
    f"<api_key>{ASSIGNED}</api_key>",
    f"https://api.example.com/v1?api_key%3D{ASSIGNED}",
    f"agent --api-key {ASSIGNED} --model m",
    f"deploy --github-token {ASSIGNED}",
    f"psql --password {ASSIGNED}",
    f"DefaultEndpointsProtocol=https;AccountName=cafe;AccountKey={ASSIGNED};",
    f"Ocp-Apim-Subscription-Key: {ASSIGNED}",
    f"https://cafe.blob.core.windows.net/orders?sv=2022-11-02&sig={ASSIGNED}%2Bab%3D",
    # Signed and presigned URLs, and OAuth: credentials whose query names hold no key word.
    f"GET https://cafe-orders.azurewebsites.net/api/orders?code={ASSIGNED}==",
    f"https://menus.s3.amazonaws.com/a.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={ASSIGNED}&X-Amz-Date=2",
    f"https://menus.s3.amazonaws.com/a.pdf?X-Amz-Credential={ASSIGNED}%2F20260101%2Fus-east-1%2Fs3%2Faws4_request",
    f"https://menus.s3.amazonaws.com/a.pdf?X-Amz-Security-Token={ASSIGNED}&X-Amz-Expires=60",
    f"https://storage.googleapis.com/menus/a.pdf?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature={ASSIGNED}",
    f"https://storage.googleapis.com/menus/a.pdf?X-Goog-Credential={ASSIGNED}%2F20260101%2Fauto",
    f"https://d1.cloudfront.net/menu.pdf?Expires=1767225600&Signature={ASSIGNED}~&Key-Pair-Id=APKAEIBAERJR2",
    f"https://d1.cloudfront.net/menu.pdf?Policy={ASSIGNED}__&Signature=abc~def",
    f"https://d1.cloudfront.net/menu.pdf?Key-Pair-Id={ASSIGNED}",
    f"https://cafe.example.com/callback?state=xyz&code={ASSIGNED}",
    f"https://auth.example.com/token?grant_type=authorization_code&client_secret={ASSIGNED}",
    f"<a href=\"https://menus.s3.amazonaws.com/a.pdf?X-Amz-Date=2&amp;X-Amz-Signature={ASSIGNED}\">the menu</a>",
    f"-----BEGIN OPENSSH PRIVATE KEY-----\n{ASSIGNED}\n-----END OPENSSH PRIVATE KEY-----",
    f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{ASSIGNED}\n-----END PGP PRIVATE KEY BLOCK-----",
]
# What a café's conversation says, and what a recording holds that is no secret.
CAFE_TEXT = [
    "A latte and a chocolate croissant, please.",
    "Our secret: cinnamon and a pinch of salt.",
    "The token machine is broken; the bearer of this voucher gets one free.",
    "Basic Croissant costs 3.50, a turkey sandwich with key lime pie 7.20.",
    "No password needed, my card is at the desk-lamp-by-the-window.",
    "Asian fusion is on the ASIANFUSIONSPECIALS board; risk-assessment-done-today.",
    "Visit https://cafe.example.com/menu or write to ana@example.com.",
    '{"max_tokens": 200, "prompt_tokens": 12, "sort_key": "name", "cache_key": "order-42"}',
    "A turkey-sandwich and the key-lime-pie, then msg.send to table 4; SKU 12, Sg. Pepper.",
    "Run it with --model gpt-4o-mini --max-tokens 50 --verbose; the pass-through is fine.",
    "Is the secret_menu on today? Password-free Wi-Fi, ask for the token-card at the till.",
    "The menu is at https://cafe.example.com/menu?page=2&size=large&code=LATTE1 (say code: LATTE1).",
]


def _hidden(secret: str, text: str) -> bool:
    return secret[4:16] not in text and secret[-10:] not in text


CASES = [pytest.param(secret, glue, id=f"{name}:{glue}") for name, secret in FAMILIES.items() for glue in GLUED]


@pytest.mark.parametrize(("secret", "glue"), CASES)
def test_a_provider_key_is_scrubbed_wherever_it_is_glued(secret: str, glue: str) -> None:
    text = glue.format(secret)
    scrubbed = Scrubber().scrub(text)
    assert _hidden(secret, scrubbed) and REDACTED in scrubbed


@pytest.mark.parametrize(("secret", "glue"), CASES)
def test_a_provider_key_in_json_text_inside_a_line_is_seen_and_scrubbed(secret: str, glue: str) -> None:
    # A tool call's arguments: JSON text in a string, the key as a value and as a key.
    text = glue.format(secret)
    line = {"arguments": json.dumps({"note": text, text: 1}), "nested": json.dumps(json.dumps({"note": text}))}
    scrubber = Scrubber()
    assert scrubber.may_need_scrubbing(json.dumps(line)), "the line would be written without a walk"
    assert _hidden(secret, json.dumps(scrubber.scrub_json(line)))


@pytest.mark.parametrize("text", ASSIGNMENTS)
def test_an_assigned_secret_is_scrubbed_raw_and_json_escaped(text: str) -> None:
    scrubber = Scrubber()
    for form in (text, json.dumps(text)[1:-1], json.dumps(json.dumps(text))[1:-1]):
        scrubbed = scrubber.scrub(form)
        assert ASSIGNED not in scrubbed and "bGl2ZS" not in scrubbed and REDACTED in scrubbed, form


def test_the_value_of_an_object_key_naming_a_secret_is_scrubbed() -> None:
    value = {"env": {"OPENAI_API_KEY": ASSIGNED, "x_auth_token": ASSIGNED, "deploy.secret": ASSIGNED,
                     "prompt_tokens": "12", "sort_key": "name"}}
    scrubbed = Scrubber().scrub_json(value)
    assert scrubbed["env"] == {"OPENAI_API_KEY": REDACTED, "x_auth_token": REDACTED, "deploy.secret": REDACTED,
                               "prompt_tokens": "12", "sort_key": "name"}


@pytest.mark.parametrize("text", CAFE_TEXT)
def test_cafe_text_is_left_as_it_is(text: str) -> None:
    assert Scrubber().scrub(text) == text
    assert Scrubber().findings(text) == []


def test_a_line_without_a_keyword_is_written_without_a_walk() -> None:
    # `prompt_tokens` is in every response: counted as `token`, every line would be walked.
    line = json.dumps({"messages": [{"role": "user", "content": CAFE_TEXT[0]}],
                       "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})
    assert not Scrubber().may_need_scrubbing(line)


class _Replying:
    """A model that says every family, glued, in its reply and its tool call's arguments."""

    model, provider = "m", "test"

    def chat(self, messages: list[dict[str, Any]], tools: Any = None, temperature: float = 0.0,
             tool_choice: Any = None) -> dict[str, Any]:
        said = " ".join([*(f"deploy_{secret}" for secret in FAMILIES.values()), *ASSIGNMENTS])
        call = {"id": "call_1", "type": "function",
                "function": {"name": "note", "arguments": json.dumps({"text": said})}}
        message = {"role": "assistant", "content": said, "tool_calls": [call]}
        return {"id": "r1", "model": "m", "usage": None,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}


def _plain_file(path: Path) -> Path:
    """A recording another harness wrote, unscrubbed."""
    request = {"messages": [{"role": "user", "content": "A latte."}]}
    path.write_text(json.dumps({"request": request, "response": _Replying().chat([])}) + "\n")
    return path


def test_the_recorder_writes_none_of_them(tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    client = RecordingClient(_Replying(), path, scrubber=Scrubber())
    client.chat([{"role": "user", "content": "A latte."}])
    client.close()
    text = path.read_text()
    assert all(_hidden(secret, text) for secret in FAMILIES.values())
    assert ASSIGNED not in text and "bGl2ZS" not in text
    load_recording(path)


def test_check_recording_finds_every_one_in_a_plain_file(tmp_path: Path) -> None:
    # One per line, each as a tool call's arguments (JSON text in a string) of a plain call line.
    said = [*(f"deploy_{secret}" for secret in FAMILIES.values()), *ASSIGNMENTS]
    path = tmp_path / "theirs.jsonl"
    path.write_text("".join(json.dumps({"arguments": json.dumps({"text": text})}) + "\n" for text in said))
    found = {finding.line for finding in check_file(path, Scrubber()) if finding.kind.startswith("secret")}
    assert found == set(range(1, len(said) + 1))
    code, out, _ = run_cli("check-recording", str(_plain_file(tmp_path / "plain.jsonl")))
    assert code == 39 and all(_hidden(secret, out) for secret in FAMILIES.values())


def test_the_page_of_a_plain_file_shows_none_of_them(tmp_path: Path) -> None:
    path = _plain_file(tmp_path / f"theirs-deploy_{FAMILIES['openai project']}.jsonl")
    page = tmp_path / "page.html"
    code, _, err = run_cli("view", str(path), "-o", str(page))
    assert code == 0, err
    text = page.read_text()
    assert all(_hidden(secret, text) for secret in FAMILIES.values())
    assert ASSIGNED not in text and "theirs-deploy_[REDACTED].jsonl" in text


def test_the_patterns_have_one_home_that_every_face_shares() -> None:
    import importlib

    import cafe.privacy
    import cafe.recording
    import cafe_otel._privacy.resource

    assert cafe.recording.Scrubber is cafe.privacy.Scrubber
    assert cafe.recording.DEFAULT_SECRET_PATTERNS is cafe.privacy.DEFAULT_SECRET_PATTERNS
    assert cafe_otel._privacy.resource.holds_secret is cafe.privacy.holds_secret
    for gone in ("cafe.recording.scrub", "cafe.view.scrubbing"):  # no second way to import them
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)
