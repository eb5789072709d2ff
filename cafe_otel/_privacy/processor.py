"""The metadata-only check: what reaches the exporter is metadata, never content.

`SpanSanitiser` is the check; `configure`'s chain runs it on the export worker
(`BoundedBatchSpanProcessor(prepare=...)`), before anything is encoded, so `span.end()` on
the calling thread does not pay it. `MetadataOnlySpanProcessor` runs the same check in
`on_end`, for a chain composed by hand: it wraps the next processor and, at `on_end`, hands
it a sanitised COPY of the span (a `ReadableSpan`'s attributes are read-only).
Every key must be on the allowlist AND its value must fit the key's declared shape
(`cafe_otel._privacy.shapes`): a value that does not fit is withheld and counted in the
account by key (an identifier is replaced by a keyed hash), and so is a value holding a
secret: one we were given, or what the secret patterns a recording is scrubbed with find
(`cafe_otel._privacy.secrets`). Span names, event names, instrumentation scopes, links and
the trace state are shaped and checked the same way; the status description is removed.
A third-party HTTP span in the pre-stable names (`http.method`, `http.url`) is read in the
stable ones (`cafe_otel._privacy.http_names`), its URL's query never.
Content keys (only on the allowlist when content capture is on) pass scrubbed of secrets,
as a recording is. Resource attributes are kept (they are the service's own
configuration), but for one holding a secret (`cafe_otel._privacy.resource`). It applies to
every span on the provider, ours and any third-party instrumentation's.

It fails CLOSED: if sanitising raises, the span is dropped and counted in the account,
and nothing is raised into `span.end()` (that would surface in application code).
`on_start` is not forwarded: at start the span is the live, unsanitised object.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from types import MappingProxyType
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, Status, TraceState

from cafe.privacy import Scrubber
from cafe_otel._export.account import TelemetryAccount
from cafe_otel._privacy import shapes as sh
from cafe_otel._privacy.http_names import DERIVED, stable_names
from cafe_otel._privacy.resource import ResourceGuard
from cafe_otel._privacy.secrets import SecretCheck
from cafe_otel.semconv import CONTENT_ATTRIBUTES, METADATA_ALLOWLIST

Sanitiser = Callable[[ReadableSpan], ReadableSpan]
_SDK_SPAN = ReadableSpan  # what an SDK span hands its processors as it ends
_WITHHELD = object()
HASH_MARKER = "hmac:"
_MEMO_SIZE = 4096  # bound on each memo of values already found to fit
_SCRUB_MEMO_SIZE = 64  # content texts kept with their scrubbed form


def _plain(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes as a plain dict, read once. A finished SDK span's `attributes` is a
    read-only proxy of the SDK's `BoundedAttributes`, a Python-level mapping (iterating it
    costs a few µs a span); the proxy's public `copy()` asks that mapping for its own copy,
    a plain dict made at C speed. Anything else is read item by item."""
    if type(attributes) is dict:
        return attributes
    if type(attributes) is MappingProxyType:
        try:
            copied = attributes.copy()
        except Exception:  # a hand-made span's own mapping may have no copy, or a broken one
            copied = None
        if type(copied) is dict:
            return copied
    return dict(attributes)


class SpanSanitiser:
    """Builds the metadata-only copy of a span (or returns the span itself when nothing in
    it needs changing: our own spans usually, and copying them would be pure cost).

    `hash_key` keys the hash that replaces an identifier that does not fit its shape: a
    random one per sanitiser by default (a plain hash of a customer's sentence could be
    confirmed by guessing it); replays pass a fixed one so their bytes stay the same.
    `secret_patterns`: the scrubber whose patterns find a secret in a value (default:
    cafe's own; `configure` passes one with `CAFE_SCRUB_PATTERNS` too)."""

    def __init__(
        self,
        allowed: Iterable[str] = METADATA_ALLOWLIST,
        *,
        shapes: Mapping[str, sh.Shape] = sh.SHAPES,
        account: TelemetryAccount | None = None,
        secrets: Iterable[str] = (),
        content_scrubber: Scrubber | None = None,
        hash_key: bytes | None = None,
        secret_patterns: Scrubber | None = None,
    ) -> None:
        self._allowed = frozenset(allowed)
        unshaped = sorted(self._allowed - set(shapes))
        if unshaped:
            raise ValueError(f"allowlisted keys without a declared shape: {', '.join(unshaped)}")
        self._shapes = shapes
        self._account = account
        self._hash_key = os.urandom(32) if hash_key is None else hash_key
        self._has_secret = SecretCheck(secret_patterns)  # known secrets, and the secret patterns
        self._scrubber = (content_scrubber or Scrubber()) if self._allowed & CONTENT_ATTRIBUTES else None
        self._scopes: dict[int, tuple[InstrumentationScope, InstrumentationScope]] = {}
        # The operator's resource, without a secret pasted in it.
        self._resources = ResourceGuard(patterns=secret_patterns)
        # (key, value) pairs already found to fit, for the text keys whose values repeat;
        # ids and counts vary with every call, and content is scrubbed every time.
        self._memoisable = frozenset(key for key in self._allowed
                                     if shapes[key].kind == sh.TEXT and shapes[key].on_mismatch != sh.HASH)
        self._known: set[tuple[str, Any]] = set()
        # The fast path's checks: metadata keys only (content is always scrubbed).
        self._checks = {key: shapes[key].fits for key in self._allowed if shapes[key].kind != sh.CONTENT}
        # Names found to fit, by what they name; emptied in place, so the span names' set
        # can be read without a lookup.
        self._names: dict[str, set[str]] = {}
        self._span_names = self._names.setdefault("span.name", set())
        # The resource and scope last seen with their checked forms: a provider has one
        # resource and few scopes, so a span usually costs an identity test for each.
        self._last_resource: tuple[Resource, Resource] | None = None
        self._scrubbed: dict[str, str] = {}
        # Spans are checked on an export worker while the caller may add secrets: a span is
        # checked against one set of secrets and memos, never half of two.
        self._lock = threading.Lock()
        self._literals: tuple[str, ...] = ()  # every secret given, for content's scrubber too
        self.add_secrets(secrets)

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Values (a live client's API key) that must never leave: a metadata value holding
        one is withheld, content is scrubbed of them."""
        with self._lock:
            self._add_secrets(tuple(secrets))

    def _add_secrets(self, secrets: tuple[str, ...]) -> None:
        new = tuple(s for s in secrets if s and s not in self._literals)
        if not new:
            return
        self._literals += new
        # A short one (a local server's placeholder key) is not looked for in metadata
        # (`SecretCheck.add_known`); content still goes through the scrubber's own rule.
        self._has_secret.add_known(new)
        self._known = set()  # what fit before may hold one of them
        self._resources.add_secrets(new)
        self._last_resource = None
        for seen in self._names.values():
            seen.clear()
        self._scrubbed = {}
        if self._scrubber is not None:
            self._scrubber = self._scrubber.with_literals(new)

    # --- what other checks share (`cafe_otel._privacy.metrics`) -----------------------
    @property
    def lock(self) -> threading.Lock:
        """Held while a check runs: one set of secrets and memos for the whole of it."""
        return self._lock

    def holds_secret(self, value: Any) -> bool:
        """Whether `value` (a string, or an array of them) holds a secret."""
        return self._has_secret(value)

    def resource(self, resource: Resource) -> Resource:
        """`resource` without the attributes that hold a secret (itself when none does)."""
        return self._resources(resource)

    def scope(self, scope: InstrumentationScope | None) -> InstrumentationScope | None:
        """`scope` shaped and checked (itself when it may leave as it is)."""
        return self._scope(scope)

    def content(self, value: Any) -> Any:
        """Structured content (the content event's message parts: dictionaries, lists,
        strings, numbers) with every string in it scrubbed, as content on a span is; None
        when this sanitiser lets no content out. Called with `lock` held."""
        if self._scrubber is None:
            return None
        if isinstance(value, str):
            return self._scrub(value)
        if isinstance(value, Mapping):
            return {str(key): self.content(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.content(item) for item in value]
        return value if value is None or isinstance(value, bool | int | float) else None

    # --- values --------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        # The scrubber's patterns cost about a millisecond per kilobyte; tool definitions and
        # system instructions come back unchanged on every call, so their result is kept.
        done = self._scrubbed.get(text)
        if done is None:
            scrubbed = self._scrubber.scrub(text)  # type: ignore[union-attr]
            done = text if scrubbed == text else scrubbed
            if len(self._scrubbed) >= _SCRUB_MEMO_SIZE:
                self._scrubbed.clear()
            self._scrubbed[text] = done
        return done

    def _withhold(self, what: str) -> None:
        if self._account is not None:
            self._account.add_withheld(what)

    def _hash(self, value: str) -> str:
        digest = hmac.new(self._hash_key, value.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return HASH_MARKER + digest.hexdigest()[:16]

    def _value(self, key: str, value: Any) -> Any:
        """`value` itself when it may leave, a replacement, or _WITHHELD."""
        if key not in self._allowed:
            return _WITHHELD  # off the allowlist: removed, as always (not worth counting)
        shape = self._shapes[key]
        if shape.kind == sh.CONTENT:
            if not isinstance(value, str) or self._scrubber is None:
                self._withhold(key)
                return _WITHHELD
            return self._scrub(value)
        if self._has_secret(value):
            self._withhold(key)
            return _WITHHELD
        if shape.fits(value):
            return value
        self._withhold(key)
        if shape.on_mismatch == sh.HASH and isinstance(value, str):
            return self._hash(value)
        return _WITHHELD

    def attributes(self, attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The attributes that may leave, or None when that is all of them."""
        if attributes is None:
            return None
        found = _plain(attributes)  # emptiness asked of the copy: an SDK mapping's len is Python
        if not found:
            return None
        try:
            if self._all_fit(found):
                return None
        except TypeError:  # an unhashable value (a list in a hand-made span): the full check says
            pass
        out: dict[str, Any] | None = None
        derived: dict[str, Any] = {}
        known, checks = self._known, self._checks
        for index, item in enumerate(found.items()):
            try:
                if item in known:  # seen before and fit: model names, operations, providers
                    if out is not None:
                        out[item[0]] = item[1]
                    continue
            except TypeError:  # an unhashable value: checked below like any other
                pass
            key, value = item
            check = checks.get(key)
            kept = (value if check is not None and check(value) and not self._has_secret(value)
                    else self._value(key, value))
            if kept is value:
                if key in self._memoisable:
                    self._remember(item)
                if out is not None:
                    out[key] = value
                continue
            if out is None:
                out = dict(list(found.items())[:index])
            if kept is not _WITHHELD:
                out[key] = kept
            elif key in DERIVED:  # a pre-stable HTTP name: what it says, in the stable names
                for name, said in stable_names(key, value).items():
                    derived.setdefault(name, said)  # the first attribute to say it is heard
        if derived and out is not None:
            for key, value in derived.items():
                if key not in found and (kept := self._value(key, value)) is not _WITHHELD:
                    out[key] = kept
        return out

    def _all_fit(self, attributes: dict[str, Any]) -> bool:
        """Whether every item may leave as it is: the common case (our own spans), checked
        in one tight loop that stops at the first item needing more (the loop in
        `attributes` then decides, and counts). Raises TypeError on an unhashable value."""
        known, checks, memoisable, has_secret = self._known, self._checks, self._memoisable, self._has_secret
        for item in attributes.items():
            if item in known:
                continue
            key, value = item
            check = checks.get(key)
            if check is None or not check(value) or has_secret(value):
                return False
            if key in memoisable:
                self._remember(item)
        return True

    def _remember(self, item: tuple[str, Any]) -> None:
        if len(self._known) >= _MEMO_SIZE:
            self._known.clear()
        with suppress(TypeError):  # an unhashable value (a list in a hand-made span): not remembered
            self._known.add(item)

    def _name(self, name: str, shape: sh.Shape, what: str) -> str:
        seen = self._names.setdefault(what, set())
        if name in seen:
            return name
        if shape.fits(name) and not self._has_secret(name):
            if len(seen) >= _MEMO_SIZE:
                seen.clear()
            seen.add(name)
            return name
        self._withhold(what)
        return sh.REDACTED_NAME

    def _context(self, context: SpanContext | None) -> SpanContext | None:
        """The context with its trace state reduced to a shaped `ot` entry (other entries
        are vendors' free-form values, and a parent's can carry anything), or None when
        there is nothing to reduce."""
        if context is None or not context.trace_state:
            return None
        kept = [(k, v) for k, v in context.trace_state.items() if k == "ot" and sh.TRACESTATE_OT.fits(v)]
        if len(kept) == len(context.trace_state):
            return None
        self._withhold("tracestate")
        return SpanContext(context.trace_id, context.span_id, context.is_remote, context.trace_flags,
                           TraceState(kept))

    def _scope(self, scope: InstrumentationScope | None) -> InstrumentationScope | None:
        if scope is None:
            return None
        cached = self._scopes.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1]
        attributes = self.attributes(scope.attributes)
        name = scope.name if sh.SCOPE_NAME.fits(scope.name) and not self._has_secret(scope.name) else sh.REDACTED_NAME
        version = scope.version if not scope.version or (
            sh.SCOPE_VERSION.fits(scope.version) and not self._has_secret(scope.version)) else None
        schema = scope.schema_url if not scope.schema_url or sh.SCHEMA_URL.fits(scope.schema_url) else None
        if name is not scope.name:
            self._withhold("scope.name")
        if version is not scope.version:
            self._withhold("scope.version")
        if attributes is None and (name, version, schema) == (scope.name, scope.version, scope.schema_url):
            clean = scope
        else:
            clean = InstrumentationScope(name, version, schema,
                                         attributes if attributes is not None else scope.attributes)
        if len(self._scopes) > 256:  # a bound: scopes are few, but nothing here may grow forever
            self._scopes.clear()
        self._scopes[id(scope)] = (scope, clean)
        return clean

    def _events(self, events: Sequence[Event]) -> tuple[list[Event], bool]:
        """The events with shaped names and attributes, and whether any changed."""
        kept, changed = [], False
        for event in events:
            event_name = self._name(event.name, sh.EVENT_NAME, "event.name")
            event_attributes = self.attributes(event.attributes)
            if event_name is event.name and event_attributes is None:
                kept.append(event)
                continue
            changed = True
            kept.append(Event(event_name, event_attributes if event_attributes is not None else event.attributes,
                              timestamp=event.timestamp))
        return kept, changed

    def _links(self, links: Sequence[Link]) -> tuple[list[Link], bool]:
        """The links with shaped attributes and trace state, and whether any changed."""
        kept, changed = [], False
        for link in links:
            link_attributes = self.attributes(link.attributes)
            link_context = self._context(link.context)
            if link_attributes is None and link_context is None:
                kept.append(link)
                continue
            changed = True
            kept.append(Link(link_context or link.context,
                             link_attributes if link_attributes is not None else link.attributes))
        return kept, changed

    # --- the span ------------------------------------------------------------------
    def __call__(self, span: ReadableSpan) -> ReadableSpan:
        with self._lock:
            return self._sanitise(span)

    def each(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan | Exception]:
        """Every span of a batch checked as `self(span)` checks it, under one hold of the
        lock: the span or its metadata-only copy, or the `Exception` its check raised (the
        caller drops that span and counts it: fail closed)."""
        out: list[ReadableSpan | Exception] = []
        with self._lock:
            for span in spans:
                try:
                    out.append(span if self._fits_as_it_is(span) else self._sanitise(span))
                except Exception as error:  # this span only; the batch's others are still checked
                    out.append(error)
        return out

    def _fits_as_it_is(self, span: ReadableSpan) -> bool:
        """True when an SDK span may leave as it is, by the common case alone: its name,
        scope and resource seen before unchanged, no events, links, trace state or status
        text, and every attribute fitting. False sends it to the full check (`_sanitise`),
        which decides and counts. The SDK span's own fields are read, not its properties,
        which copy its events, links and attributes for every span; a span of another
        class, or an SDK whose fields are not these, always takes the full check."""
        if type(span) is not _SDK_SPAN:
            return False
        try:
            name, found, scope, resource = span._name, span._attributes, span._instrumentation_scope, span._resource
            events, links = span._events, span._links
            if type(events) is BoundedList:
                events = events._dq  # type: ignore[attr-defined]
            if type(links) is BoundedList:
                links = links._dq  # type: ignore[attr-defined]
            if events or links or span._status._description:
                return False
            context, parent = span._context, span._parent
        except AttributeError:
            return False
        attributes: dict[str, Any] | None
        if type(found) is BoundedAttributes:
            attributes = found._dict
        elif type(found) is dict or found is None:
            attributes = found
        else:
            return False
        if name not in self._span_names or context is None or context.trace_state:
            return False
        if parent is not None and parent.trace_state:
            return False
        seen = self._last_resource
        if seen is None or seen[0] is not resource or seen[1] is not resource:
            return False
        cached = self._scopes.get(id(scope))
        if cached is None or cached[0] is not scope or cached[1] is not scope:
            return False
        try:
            return not attributes or self._all_fit(attributes)
        except TypeError:  # an unhashable value: the full check says
            return False

    def _sanitise(self, span: ReadableSpan) -> ReadableSpan:
        # On the export worker, for every span: the common case (our own spans, names and
        # scope seen before, no events, links or trace state) is tested inline; the rest
        # goes through the helpers above.
        original_name, original_scope = span.name, span.instrumentation_scope
        name = original_name if original_name in self._span_names else self._name(
            original_name, sh.SPAN_NAME, "span.name")
        attributes = self.attributes(span.attributes)
        changed = name is not original_name or attributes is not None
        events: Sequence[Event] = span.events
        if events:
            events, events_changed = self._events(events)
            changed |= events_changed
        links: Sequence[Link] = span.links
        if links:
            links, links_changed = self._links(links)
            changed |= links_changed
        found = span.context
        context = self._context(found) if found is not None and found.trace_state else None
        found = span.parent
        parent = self._context(found) if found is not None and found.trace_state else None
        cached = self._scopes.get(id(original_scope))
        scope = cached[1] if cached is not None and cached[0] is original_scope else self._scope(original_scope)
        original_resource = span.resource
        seen = self._last_resource
        if seen is not None and seen[0] is original_resource:
            resource = seen[1]
        else:
            resource = self._resources(original_resource)
            self._last_resource = (original_resource, resource)
        if resource is not original_resource:
            self._withhold("resource")
        status = span.status
        changed |= (context is not None or parent is not None or scope is not original_scope
                    or resource is not original_resource or bool(status.description))
        if not changed:
            return span
        return ReadableSpan(
            name=name,
            context=context or span.context,
            parent=parent or span.parent,
            resource=resource,
            attributes=attributes if attributes is not None else span.attributes,
            events=events,
            links=links,
            kind=span.kind,
            status=Status(status.status_code),  # the description is free text: dropped
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=scope,
        )


def sanitise_span(span: ReadableSpan, allowed: Iterable[str] = METADATA_ALLOWLIST, **options: Any) -> ReadableSpan:
    """`span` itself when it holds nothing to change, else its metadata-only copy (the
    options are SpanSanitiser's)."""
    return SpanSanitiser(allowed, **options)(span)


class MetadataOnlySpanProcessor(SpanProcessor):
    def __init__(
        self,
        next_processor: SpanProcessor,
        *,
        allowlist: Iterable[str] = METADATA_ALLOWLIST,
        account: TelemetryAccount | None = None,
        sanitiser: Sanitiser | None = None,
        secrets: Iterable[str] = (),
        content_scrubber: Scrubber | None = None,
        hash_key: bytes | None = None,
        shapes: Mapping[str, sh.Shape] = sh.SHAPES,
        secret_patterns: Scrubber | None = None,
    ) -> None:
        self._next = next_processor
        self.account = account if account is not None else TelemetryAccount()
        self._default = SpanSanitiser(allowlist, shapes=shapes, account=self.account, secrets=secrets,
                                      content_scrubber=content_scrubber, hash_key=hash_key,
                                      secret_patterns=secret_patterns)
        self._sanitise: Sanitiser = sanitiser or self._default

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """More values that must never leave (e.g. the live client's key, once it is known)."""
        self._default.add_secrets(secrets)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            clean = self._sanitise(span)
        except Exception as error:  # fail closed: never hand on the raw span
            self.account.add_redaction_failed(
                f"sanitising a span raised {type(error).__name__}; span dropped")
            return
        try:
            self._next.on_end(clean)
        except Exception as error:  # a processor must not raise into span.end()
            self.account.add_export_failed(
                1, f"next processor raised {type(error).__name__} in on_end; span dropped")

    def shutdown(self) -> None:
        self._next.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._next.force_flush(timeout_millis)
