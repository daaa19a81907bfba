#!/usr/bin/env python3
"""Reference table for the gateway's request validation.

Reproduces, with the stdlib json module and pydantic 2 (FastAPI itself is not
needed), what a FastAPI service answers for the request bodies of

    POST /api/campaigns/send    (CampaignSendRequest)
    POST /api/automations/send  (AutomationTriggerRequest)

and writes testdata/reference.json, which the Go tests replay byte for byte.

    python3 gen_reference.py            # rewrite reference.json next to this file
    python3 gen_reference.py --eval     # JSON lines in, outcomes out (differential tests)

The pipeline mirrors fastapi.routing.get_request_handler and
fastapi.dependencies.utils.request_body_to_args:

1. an empty body is a missing body;
2. with a JSON content type (or none) the bytes go through json.loads;
   JSONDecodeError -> 422 json_invalid, any other exception -> 400;
   otherwise the raw bytes are the model input;
3. None -> missing body; else TypeAdapter(Model).validate_python(obj,
   from_attributes=True), errors with include_url=False and "body" in front
   of every loc;
4. {"detail": jsonable_encoder(errors)} serialised the way Starlette's
   JSONResponse does it.

Where FastAPI would answer 500 (its encoder cannot write the value) or where
its outcome depends on the Python stack depth, the gateway follows a policy
instead; the policies are implemented here too, marked POLICY, and the Go
package doc lists them.
"""

import base64
import email.message
import hashlib
import json
import math
import os
import re
import sys
from datetime import datetime, timedelta
from typing import Annotated, Dict, List, Optional

import pydantic
import pydantic_core
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    GetPydanticSchema,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import PydanticKnownError, core_schema

PHONE_PATTERN = r"^\+?[1-9]\d{6,14}$"
URL_PATTERN = r"^https?://\S+$"

# POLICY: Python gives up on deep nesting at a depth that depends on the
# caller's stack (RecursionError -> 400). The gateway answers the same 400 as
# soon as arrays/objects nest deeper than this.
MAX_DEPTH = 512


def _ascii_digits(value: str) -> str:
    # POLICY: phone numbers are E.164, ASCII digits only. rust-regex's \d also
    # matches other scripts' digits; those get pydantic's own pattern error.
    if not value.isascii():
        raise PydanticKnownError("string_pattern_mismatch", {"pattern": PHONE_PATTERN})
    return value


Phone = Annotated[str, StringConstraints(pattern=PHONE_PATTERN), AfterValidator(_ascii_digits)]
Url = Optional[Annotated[str, StringConstraints(max_length=2048, pattern=URL_PATTERN)]]
Name = Optional[Annotated[str, StringConstraints(max_length=255)]]
VarKey = Annotated[str, StringConstraints(max_length=100)]
VarValue = Annotated[str, StringConstraints(max_length=4096)]
# A string of at most 64 characters that must then parse as a datetime:
# str validation first (string_type, string_too_long), then pydantic's lax
# datetime-from-str on the validated string.
ScheduledAt = Annotated[
    Optional[datetime],
    GetPydanticSchema(
        lambda _tp, _handler: core_schema.nullable_schema(
            core_schema.chain_schema(
                [core_schema.str_schema(max_length=64), core_schema.datetime_schema()]
            )
        )
    ),
]


class CampaignSendRequest(BaseModel):
    campaign_id: int
    contacts: List[Phone] = Field(max_length=1000)
    is_forced: bool = False
    scheduled_at: ScheduledAt = None


class AutomationTriggerContact(BaseModel):
    phone: Phone
    first_name: Name = None
    last_name: Name = None
    image_url: Url = None
    video_url: Url = None
    variables: Optional[Dict[VarKey, VarValue]] = None


class AutomationTriggerRequest(BaseModel):
    automation_id: int
    contacts: List[AutomationTriggerContact] = Field(max_length=1000)
    image_url: Url = None
    video_url: Url = None
    url: Url = None
    url2: Url = None


ADAPTERS = {
    "campaign": TypeAdapter(CampaignSendRequest),
    "automation": TypeAdapter(AutomationTriggerRequest),
}

MISSING_BODY = [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
PARSE_ERROR_400 = b'{"detail":"There was an error parsing the body"}'


def is_json_content_type(value):
    """fastapi.routing: no header, application/json or application/*+json."""
    if not value:
        return True
    message = email.message.Message()
    message["content-type"] = value
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def first_depth_violation(text):
    """Index of the first '[' or '{' that nests deeper than MAX_DEPTH, or None."""
    depth = 0
    in_string = False
    escaped = False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif c in "]}":
            depth -= 1
    return None


def decoded_text(body):
    """The str json.loads works on, or None when it cannot decode the bytes."""
    try:
        return body.decode(json.detect_encoding(body), "surrogatepass")
    except UnicodeDecodeError:
        return None


def jsonable(obj):
    """The part of fastapi.encoders.jsonable_encoder these values reach."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items() if not (isinstance(k, str) and k.startswith("_sa"))}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bytes):
        return obj.decode()
    return obj


def _finite(obj):
    # POLICY: json.dumps(allow_nan=False) fails on NaN/Infinity (FastAPI: 500);
    # the gateway writes them as null, as JavaScript's JSON.stringify does.
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")


def render(content):
    """Starlette JSONResponse.render, plus the two POLICY substitutions."""
    text = json.dumps(_finite(content), ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
    # POLICY: a lone surrogate cannot be written as UTF-8 (FastAPI: 500); the
    # gateway writes it as a \\udXXX escape, which is still valid JSON.
    text = _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), text)
    return text.encode("utf-8")


def unix_micros(dt):
    """Microseconds since the epoch; a datetime without offset is UTC."""
    naive = dt.replace(tzinfo=None)
    micros = (naive - datetime(1970, 1, 1)) // timedelta(microseconds=1)
    offset = dt.utcoffset()
    if offset is not None:
        micros -= offset // timedelta(microseconds=1)
    return micros


def normalise(endpoint, model):
    """The decoded request in the shape the Go test compares."""
    if endpoint == "campaign":
        return {
            "campaign_id": model.campaign_id,
            "contacts": list(model.contacts),
            "is_forced": model.is_forced,
            "scheduled_at_unix_us": None if model.scheduled_at is None else unix_micros(model.scheduled_at),
        }
    contacts = []
    for c in model.contacts:
        contacts.append(
            {
                "phone": c.phone,
                "first_name": c.first_name,
                "last_name": c.last_name,
                "image_url": c.image_url,
                "video_url": c.video_url,
                "variables": None if c.variables is None else [[k, v] for k, v in c.variables.items()],
            }
        )
    return {
        "automation_id": model.automation_id,
        "contacts": contacts,
        "image_url": model.image_url,
        "video_url": model.video_url,
        "url": model.url,
        "url2": model.url2,
    }


def outcome(endpoint, body, content_type="application/json"):
    """What the service answers: {"status": 422|400, "body": ...} or {"status": 200, "value": ...}."""
    if not body:
        return {"status": 422, "body": render({"detail": MISSING_BODY}).decode()}
    if is_json_content_type(content_type):
        text = decoded_text(body)
        if text is None:
            return {"status": 400, "body": PARSE_ERROR_400.decode()}
        deep = first_depth_violation(text)
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            if deep is not None and deep < e.pos:
                return {"status": 400, "body": PARSE_ERROR_400.decode()}
            item = {
                "type": "json_invalid",
                "loc": ["body", e.pos],
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": e.msg},
            }
            return {"status": 422, "body": render({"detail": [item]}).decode()}
        except Exception:  # RecursionError, ValueError for > 4300 digits
            return {"status": 400, "body": PARSE_ERROR_400.decode()}
        if deep is not None:
            return {"status": 400, "body": PARSE_ERROR_400.decode()}
    else:
        obj = body
        try:
            body.decode()
        except UnicodeDecodeError:
            # POLICY: jsonable_encoder cannot decode the echoed bytes (FastAPI:
            # 500); the gateway answers the 400 of an undecodable body.
            return {"status": 400, "body": PARSE_ERROR_400.decode()}
    if obj is None:
        return {"status": 422, "body": render({"detail": MISSING_BODY}).decode()}
    try:
        model = ADAPTERS[endpoint].validate_python(obj, from_attributes=True)
    except ValidationError as exc:
        errors = [{**err, "loc": ("body",) + tuple(err["loc"])} for err in exc.errors(include_url=False)]
        return {"status": 422, "body": render({"detail": jsonable(errors)}).decode()}
    return {"status": 200, "value": normalise(endpoint, model)}


# ---------------------------------------------------------------- the cases

CASES = []


def case(name, endpoint, body, content_type="application/json"):
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    elif not isinstance(body, bytes):
        body = json.dumps(body, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    CASES.append((name, endpoint, body, content_type))


def phones(n, start=393330000000):
    return ["+%d" % (start + i) for i in range(n)]


def campaign_cases():
    c = "campaign"
    ok = {"campaign_id": 7, "contacts": ["+393331234567"]}

    # valid bodies
    case("campaign/valid/minimal", c, ok)
    case("campaign/valid/ten-contacts-forced", c, {"campaign_id": 42, "contacts": phones(10), "is_forced": True})
    case("campaign/valid/empty-contacts", c, {"campaign_id": 1, "contacts": []})
    case("campaign/valid/1000-contacts", c, {"campaign_id": 1, "contacts": phones(1000)})
    case("campaign/valid/duplicates-kept", c, {"campaign_id": 1, "contacts": ["+393331234567", "393331234567", "+393331234567"]})
    case("campaign/valid/extra-fields-ignored", c, {"campaign_id": 1, "contacts": [], "foo": {"bar": [1, 2]}, "is_forced": False})
    case("campaign/valid/whitespace-around", c, ' \n\t{"campaign_id" : 3 , "contacts" : [ "1234567" ] }\r\n ')
    case("campaign/valid/escaped-key", c, '{"campaign\\u005fid":5,"contacts":["\\u002b1234567"]}')
    case("campaign/valid/utf8-bom", c, b"\xef\xbb\xbf" + json.dumps(ok).encode())
    case("campaign/valid/utf16-le-bom", c, json.dumps(ok).encode("utf-16"))
    case("campaign/valid/utf16-be-no-bom", c, json.dumps(ok).encode("utf-16-be"))
    case("campaign/valid/utf16-le-no-bom", c, json.dumps(ok).encode("utf-16-le"))
    case("campaign/valid/utf32-bom", c, json.dumps(ok).encode("utf-32"))
    case("campaign/valid/utf32-be-no-bom", c, json.dumps(ok).encode("utf-32-be"))
    case("campaign/valid/utf32-le-no-bom", c, json.dumps(ok).encode("utf-32-le"))
    case("campaign/valid/lone-surrogate-in-ignored-field", c, b'{"campaign_id":1,"contacts":[],"x":"\xed\xa0\x80"}')
    case("campaign/valid/escaped-lone-surrogate-in-ignored-field", c, '{"campaign_id":1,"contacts":[],"x":"\\ud800"}')

    # campaign_id: lax int
    for label, v in [
        ("str", "12"), ("str-spaces", " 12 "), ("str-unicode-space", "\u00a012\u2003"), ("str-plus", "+12"),
        ("str-neg", "-12"), ("str-zero-frac", "12.000"), ("str-underscore", "1_000"), ("str-leading-zeros", "0012"),
        ("float-integral", 12.0), ("float-neg-zero", -0.0), ("float-1e16", 1e16), ("true", True), ("false", False),
        ("int-max", 2**63 - 1), ("int-min", -(2**63)), ("big-int", 2**63), ("huge-int", 10**40), ("negative", -5),
        ("str-big", "123456789012345678901234567890"), ("str-4300-digits", "9" * 4300), ("int-4300-digits", 10**4299),
    ]:
        case("campaign/campaign_id/ok-%s" % label, c, {"campaign_id": v, "contacts": []})
    for label, v in [
        ("float-fraction", 12.5), ("float-tiny", 1e-7), ("float-huge", 1.5e300), ("float-2pow63", 9.223372036854775808e18),
        ("float-neg-2pow63", -9.223372036854775808e18), ("str-fraction", "12.5"), ("str-alpha", "abc"), ("str-empty", ""),
        ("str-hex", "0x1f"), ("str-exp", "1e3"), ("str-double-underscore", "1__0"), ("str-arabic-digits", "\u0661\u0662"),
        ("str-4301-digits", "9" * 4301), ("str-4301-digits-leading-space", " " + "9" * 4301), ("null", None), ("list", [1]),
        ("object", {"a": 1}), ("str-plus-minus", "+-1"), ("str-dot", "12."), ("str-lone-surrogate", "1\ud800"),
    ]:
        case("campaign/campaign_id/bad-%s" % label, c, {"campaign_id": v, "contacts": []})
    case("campaign/campaign_id/nan", c, '{"campaign_id":NaN,"contacts":[]}')
    case("campaign/campaign_id/infinity", c, '{"campaign_id":Infinity,"contacts":[]}')
    case("campaign/campaign_id/neg-infinity", c, '{"campaign_id":-Infinity,"contacts":[]}')
    case("campaign/campaign_id/exp-overflow", c, '{"campaign_id":1e400,"contacts":[]}')
    case("campaign/campaign_id/exp-underflow", c, '{"campaign_id":1e-400,"contacts":[]}')
    case("campaign/campaign_id/exp-integral", c, '{"campaign_id":1.5E2,"contacts":[]}')
    case("campaign/campaign_id/neg-zero-int", c, '{"campaign_id":-0,"contacts":[]}')
    case("campaign/campaign_id/int-4301-digits", c, '{"campaign_id":%s,"contacts":[]}' % ("9" * 4301))

    # contacts
    for label, v in [
        ("7-digits", "1234567"), ("15-digits", "+123456789012345"), ("plus-7", "+1234567"),
    ]:
        case("campaign/contacts/ok-%s" % label, c, {"campaign_id": 1, "contacts": [v]})
    for label, v in [
        ("6-digits", "123456"), ("16-digits", "1234567890123456"), ("plus-16", "+1234567890123456"),
        ("leading-zero", "0123456789"), ("double-plus", "++1234567"), ("spaces", "+39 333 1234567"),
        ("trailing-newline", "+1234567\n"), ("arabic-indic-digits", "+\u0663\u0669\u0663\u0663\u0663\u0661\u0662\u0663"),
        ("fullwidth-digit", "12345678\uff19"), ("empty", ""), ("letters", "phone"), ("dash", "+1-234-567"),
        ("lone-surrogate", "+1234567\ud800"),
    ]:
        case("campaign/contacts/bad-%s" % label, c, {"campaign_id": 1, "contacts": [v]})
    case("campaign/contacts/wrong-item-types", c, {"campaign_id": 1, "contacts": [1234567, None, True, 1.5, [], {}, "+1234567"]})
    case("campaign/contacts/1001", c, {"campaign_id": 1, "contacts": phones(1001)})
    case("campaign/contacts/1001-with-bad-items", c, {"campaign_id": 1, "contacts": [1, "x"] + phones(999)})
    for label, v in [("object", {"a": "+1234567"}), ("string", "+1234567"), ("int", 5), ("null", None), ("bool", True)]:
        case("campaign/contacts/not-a-list-%s" % label, c, {"campaign_id": 1, "contacts": v})
    case("campaign/contacts/mixed-errors-order", c, {"contacts": ["1", "+1234567", "2"], "campaign_id": "x", "is_forced": "maybe", "scheduled_at": 7})

    # is_forced: lax bool
    for v in [True, False, 1, 0, 1.0, 0.0, "true", "TRUE", "True", "yes", "Yes", "on", "1", "t", "y", "false", "no", "off", "0", "f", "n", "OFF"]:
        case("campaign/is_forced/ok-%s" % json.dumps(v), c, {"campaign_id": 1, "contacts": [], "is_forced": v})
    for v in [2, -1, 2.0, 0.5, "maybe", "", " true", "2", None, [], {}, 10**20, 1e20]:
        case("campaign/is_forced/bad-%s" % json.dumps(v), c, {"campaign_id": 1, "contacts": [], "is_forced": v})
    case("campaign/is_forced/bad-nan", c, '{"campaign_id":1,"contacts":[],"is_forced":NaN}')
    case("campaign/is_forced/bad-lone-surrogate", c, '{"campaign_id":1,"contacts":[],"is_forced":"tru\\udfff"}')
    case("campaign/is_forced/bad-big-int", c, '{"campaign_id":1,"contacts":[],"is_forced":9223372036854775808}')
    case("campaign/is_forced/bad-neg-2pow63-float", c, '{"campaign_id":1,"contacts":[],"is_forced":-9.223372036854775808e18}')

    # scheduled_at
    for label, v in [
        ("z", "2030-01-02T03:04:05Z"), ("lower-z", "2030-01-02t03:04:05z"), ("offset", "2030-01-02T03:04:05+02:00"),
        ("offset-no-colon", "2030-01-02T03:04:05-0130"), ("space", "2030-01-02 03:04:05"), ("underscore", "2030-01-02_03:04:05"),
        ("no-seconds", "2030-01-02T03:04"), ("fraction", "2030-01-02T03:04:05.123456Z"), ("fraction-7", "2030-01-02T03:04:05.1234567Z"),
        ("comma-fraction", "2030-01-02T03:04:05,5"), ("unicode-minus", "2030-01-02T03:04:05\u221201:00"), ("date-only", "2030-01-02"),
        ("naive", "2030-01-02T03:04:05"), ("timestamp", "1700000000"), ("timestamp-ms", "1700000000123"),
        ("timestamp-float", "1700000000.5"), ("timestamp-negative", "-1"), ("timestamp-exp", "1.5e3"), ("null", None),
        ("leap-day", "2028-02-29T00:00:00Z"), ("year-1-offset", "0001-01-01T00:00:00+01:00"), ("year-9999", "9999-12-31T23:59:59.999999-23:59"),
        ("64-chars", "2030-01-02T03:04:05." + "1" * 43 + "Z"), ("wrapping-timestamp", "18446744073709551620"),
    ]:
        case("campaign/scheduled_at/ok-%s" % label, c, {"campaign_id": 1, "contacts": [], "scheduled_at": v})
    for label, v in [
        ("65-chars", "2030-01-02T03:04:05." + "1" * 44 + "Z"), ("int", 1700000000), ("bool", True), ("list", []),
        ("empty", ""), ("garbage", "tomorrow"), ("short-date", "2030-1-2"), ("year-char", "x030-01-01T00:00:00"),
        ("date-sep", "2030/01/02"), ("month-char", "2030-0x-02"), ("day-char", "2030-01-x2"), ("month-range", "2030-13-01"),
        ("day-range", "2031-02-29"), ("hour-range", "2030-01-02T24:00:00"), ("tz-hour-only", "2030-01-02T03:04:05+01"),
        ("trailing-space", "2030-01-02T03:04:05 "), ("leading-space", " 2030-01-02"), ("year-zero", "0000-01-01T00:00:00"),
        ("year-zero-date", "0000-01-01"), ("before-0000", "-9999999999999999"), ("after-9999", "9999999999999999"),
        ("int-min", "-9223372036854775808"), ("leap-second", "2030-01-02T23:59:60"), ("lone-surrogate", "2030\ud800"),
        ("tz-24h", "2030-01-02T03:04:05+24:00"), ("missing-fraction", "2030-01-02T03:04:05."),
    ]:
        case("campaign/scheduled_at/bad-%s" % label, c, {"campaign_id": 1, "contacts": [], "scheduled_at": v})

    # missing, extra, duplicates, echo
    case("campaign/missing/everything", c, {})
    case("campaign/missing/campaign_id", c, {"contacts": ["+1234567"], "is_forced": True})
    case("campaign/missing/contacts", c, {"campaign_id": 3})
    case("campaign/duplicate-keys/last-wins", c, '{"campaign_id":"x","contacts":[],"campaign_id":9}')
    case("campaign/duplicate-keys/echo-first-position", c, '{"a":1,"contacts":[],"a":2,"b":3}')
    case("campaign/duplicate-keys/escaped-equal", c, '{"is_forced":1,"contacts":[],"is_\\u0066orced":"bad"}')
    case("campaign/echo/sa-keys-dropped", c, '{"_sa_instance":1,"contacts":[],"nested":{"_sa":2,"_s":3,"x_sa":4},"list":[{"_sab":5}]}')
    case("campaign/echo/floats", c, '{"contacts":[],"f":[1.0,1e16,1e15,1e-5,0.0001,-0.0,5e-324,1.7976931348623157e308,0.1,2.5e-3,123456789.123,1E+2,1e22,0.30000000000000004]}')
    case("campaign/echo/non-finite", c, '{"contacts":[],"f":[NaN,Infinity,-Infinity,1e999]}')
    case("campaign/echo/big-ints", c, '{"contacts":[],"i":[123456789012345678901234567890,-0,-12,0]}')
    case("campaign/echo/strings", c, '{"contacts":[],"s":"q\\"b\\\\s\\/n\\n\\r\\t\\b\\f\\u0000\\u001f\\u007f\\u2028\\u00e9\\ud83d\\ude00 \u00e9\u4e2d\U0001F600"}')
    case("campaign/echo/lone-surrogates", c, '{"contacts":[],"s":"\\ud800\\udc00x\\udfff\\ud83d"}')
    case("campaign/echo/raw-surrogate-bytes", c, b'{"contacts":[],"s":"a\xed\xa0\xbd\xed\xb8\x80b"}')
    case("campaign/echo/nested-empty", c, '{"contacts":[],"o":{},"l":[],"n":null,"t":true,"f":false}')

    # whole bodies that are not objects
    for label, body in [
        ("array", "[1,2]"), ("string", '"hello"'), ("int", "5"), ("float", "1.5"), ("true", "true"), ("false", "false"),
        ("null", "null"), ("nan", "NaN"), ("empty-array", "[]"), ("empty-object", "{}"),
    ]:
        case("campaign/body/%s" % label, c, body)
    case("campaign/body/empty", c, b"")
    case("campaign/body/depth-512", c, "[" * 512 + "]" * 512)
    case("campaign/body/depth-513", c, "[" * 513 + "]" * 513)
    case("campaign/body/depth-513-after-error", c, "[1 " + "[" * 600)
    case("campaign/body/depth-513-before-error", c, "[" * 600 + "1 1")

    # malformed JSON
    for label, body in [
        ("whitespace-only", "  \n "), ("open-brace", "{"), ("key-only", '{"a"'), ("key-colon", '{"a":'), ("no-close", '{"a":1'),
        ("trailing-comma-object", '{"a":1,}'), ("trailing-comma-array", "[1,]"), ("missing-comma", "[1 2]"),
        ("single-quotes", "{'a':1}"), ("missing-colon", '{"a" 1}'), ("bare-word", "hello"), ("tru", "tru"), ("nul", "nul"),
        ("minus", "-"), ("minus-x", "-x"), ("leading-zero", "01"), ("dot", "1."), ("leading-dot", ".5"), ("exp-only", "1e"),
        ("exp-sign", "1e+"), ("unterminated", '"abc'), ("unterminated-escape", '"abc\\'), ("bad-escape", '"a\\x"'),
        ("short-unicode", '"\\u12"'), ("bad-unicode", '"\\u12G4"'), ("unicode-at-end", '"\\u1234'),
        ("control-char", '"a\nb"'), ("tab-in-string", '{"a":"\t"}'), ("extra-data", '{"a":1}x'), ("two-objects", "{} {}"),
        ("double-bom", "\ufeff\ufeff{}"), ("comment", '{"a":1 /* c */}'), ("nan-lower", "nan"), ("inf-partial", "Inf"),
        ("neg-inf-partial", "-Inf"), ("plus", "+1"), ("hex", "0x10"), ("nested-error", '{"a":[1,{"b":}]}'),
        ("key-not-string", "{1:2}"), ("colon-in-array", "[1:2]"), ("close-mismatch", "[1}"), ("deep-unterminated", '{"a":{"b":["c'),
        ("non-ascii-position", '{"\u00e9\u00e9\u00e9":1,}'), ("astral-position", '["\U0001F600\U0001F600" 1]'),
        ("utf16-position", "[\"\u00e9\" x]".encode("utf-16")), ("surrogate-bytes-position", b'["\xed\xa0\x80" x]'),
        ("empty-key-no-value", '{"":}'), ("array-unclosed", "[1,2"), ("array-open", "["),
    ]:
        case("campaign/malformed/%s" % label, c, body)

    # bytes that are not text
    case("campaign/encoding/invalid-utf8", c, b'{"campaign_id":1,"contacts":["\xff"]}')
    case("campaign/encoding/truncated-utf8", c, b'{"campaign_id":1,"contacts":[]}\xe2\x82')
    case("campaign/encoding/overlong", c, b'{"campaign_id":1,"contacts":["\xc0\xaf"]}')
    case("campaign/encoding/utf16-odd-length", c, json.dumps(ok).encode("utf-16") + b"x")
    case("campaign/encoding/utf32-bad-codepoint", c, b"\xff\xfe\x00\x00" + b"\x00\x00\x11\x00")
    case("campaign/encoding/invalid-after-syntax-error", c, b'{"a" 1, "\xff"}')
    case("campaign/encoding/nul-bytes-as-utf16", c, b"1\x00")

    # content types that are not JSON: the raw bytes are the model input
    for label, ct in [
        ("text-plain", "text/plain"), ("form", "application/x-www-form-urlencoded"), ("multipart", "multipart/form-data; boundary=x"),
        ("xml", "application/xml"), ("text-json", "text/json"), ("json5", "application/json5"), ("no-slash", "application"),
        ("two-slashes", "application/json/x"),
    ]:
        case("campaign/content-type/%s" % label, c, json.dumps(ok), ct)
    for label, ct in [
        ("missing", ""), ("charset", "application/json; charset=utf-8"), ("upper", "APPLICATION/JSON"),
        ("vendor", "application/vnd.api+json"), ("padded", "  application/json  ;x"),
    ]:
        case("campaign/content-type/json-%s" % label, c, json.dumps(ok), ct)
    case("campaign/content-type/text-plain-empty", c, b"", "text/plain")
    case("campaign/content-type/text-plain-not-utf8", c, b"\xff\xfe", "text/plain")
    case("campaign/content-type/text-plain-unicode", c, "h\u00e9llo \U0001F600 \"q\"\n", "text/plain")


def automation_cases():
    a = "automation"
    contact = {"phone": "+393331234567"}

    def body(contacts, **extra):
        out = {"automation_id": 11, "contacts": contacts}
        out.update(extra)
        return out

    full = {
        "phone": "+393331234567",
        "first_name": "Ana",
        "last_name": "Lima",
        "image_url": "https://cdn.example.com/i.png",
        "video_url": "http://cdn.example.com/v.mp4",
        "variables": {"order": "A-1", "amount": "12.50"},
    }
    case("automation/valid/minimal", a, body([contact]))
    case("automation/valid/full", a, body([full], image_url="https://x.io/a.png", video_url="https://x.io/v.mp4", url="https://x.io/1", url2="http://x.io/2"))
    case("automation/valid/50-contacts", a, body([dict(full, phone=p) for p in phones(50)]))
    case("automation/valid/1000-contacts", a, body([{"phone": p} for p in phones(1000)]))
    case("automation/valid/nulls", a, body([dict(contact, first_name=None, last_name=None, image_url=None, video_url=None, variables=None)], image_url=None, url=None))
    case("automation/valid/empty-variables", a, body([dict(contact, variables={})]))
    case("automation/valid/unicode", a, body([dict(contact, first_name="J\u00f6rg \u5f20\u4f1f \U0001F600", variables={"n\u00e4me": "\U0001F600\u00e9", "\u4e2d": "\u6587"})]))
    case("automation/valid/variables-duplicate-key", a, '{"automation_id":1,"contacts":[{"phone":"+1234567","variables":{"a":"1","b":"2","a":"3"}}]}')
    case("automation/valid/url-zero-width-space", a, body([contact], url="http://a\u200bb"))
    case("automation/valid/url-unicode", a, body([contact], url="https://\u00e9xample.com/\u8def\u5f84?q=\U0001F600"))

    # boundaries
    for n in (254, 255):
        case("automation/first_name/%d-chars" % n, a, body([dict(contact, first_name="a" * n)]))
        case("automation/last_name/%d-multibyte" % n, a, body([dict(contact, last_name="\u00e9" * n)]))
        case("automation/first_name/%d-astral" % n, a, body([dict(contact, first_name="\U0001F600" * n)]))
    case("automation/first_name/256-chars", a, body([dict(contact, first_name="a" * 256)]))
    case("automation/last_name/256-multibyte", a, body([dict(contact, last_name="\u00e9" * 256)]))
    case("automation/first_name/256-astral", a, body([dict(contact, first_name="\U0001F600" * 256)]))
    url_2048 = "https://x.io/" + "a" * (2048 - len("https://x.io/"))
    case("automation/url/2048", a, body([contact], url=url_2048))
    case("automation/url/2049", a, body([contact], url=url_2048 + "a"))
    case("automation/url/2049-bad-pattern", a, body([contact], url="ftp://" + "a" * 2043))
    case("automation/image_url/contact-2048", a, body([dict(contact, image_url=url_2048)]))
    case("automation/video_url/contact-2049", a, body([dict(contact, video_url=url_2048 + "b")]))
    case("automation/url/2048-multibyte", a, body([contact], url2="https://x.io/" + "\u00e9" * (2048 - 13)))
    case("automation/url/2049-multibyte", a, body([contact], url2="https://x.io/" + "\u00e9" * (2049 - 13)))
    case("automation/variables/key-100", a, body([dict(contact, variables={"k" * 100: "v"})]))
    case("automation/variables/key-101", a, body([dict(contact, variables={"k" * 101: "v"})]))
    case("automation/variables/key-100-astral", a, body([dict(contact, variables={"\U0001F600" * 100: "v"})]))
    case("automation/variables/key-101-astral", a, body([dict(contact, variables={"\U0001F600" * 101: "v"})]))
    case("automation/variables/value-4096", a, body([dict(contact, variables={"k": "v" * 4096})]))
    case("automation/variables/value-4097", a, body([dict(contact, variables={"k": "v" * 4097})]))
    case("automation/variables/value-4096-multibyte", a, body([dict(contact, variables={"k": "\u4e2d" * 4096})]))
    case("automation/variables/value-4097-multibyte", a, body([dict(contact, variables={"k": "\u4e2d" * 4097})]))
    case("automation/variables/key-and-value-too-long", a, body([dict(contact, variables={"ok": "1", "k" * 101: "v" * 4097})]))
    case("automation/contacts/1001", a, body([{"phone": p} for p in phones(1001)]))
    case("automation/contacts/1001-invalid-items", a, body([{}] * 1001))
    for n in (6, 7, 15, 16):
        case("automation/phone/%d-digits" % n, a, body([{"phone": "+" + "1234567890123456"[:n]}]))

    # URL pattern
    for label, v in [
        ("ftp", "ftp://x.io"), ("no-host", "http://"), ("https-no-host", "https://"), ("space", "http://a b"),
        ("nbsp", "http://a\u00a0b"), ("em-space", "http://a\u2003"), ("ideographic-space", "http://\u3000x"),
        ("line-separator", "http://a\u2028"), ("nel", "http://a\u0085"), ("trailing-newline", "https://x.io\n"),
        ("leading-space", " http://x.io"), ("upper-scheme", "HTTP://x.io"), ("relative", "/path"), ("empty", ""),
        ("tab", "http://a\tb"), ("lone-surrogate", "http://a\ud800"),
    ]:
        case("automation/url-pattern/bad-%s" % label, a, body([contact], image_url=v))
    for label, v in [("int", 5), ("bool", False), ("list", ["http://x.io"]), ("object", {"u": "http://x.io"})]:
        case("automation/url-type/bad-%s" % label, a, body([contact], video_url=v))

    # contacts and their fields
    for label, v in [("string", "+1234567"), ("int", 1), ("null", None), ("list", [contact]), ("bool", True), ("float", 1.5)]:
        case("automation/contact/not-an-object-%s" % label, a, body([v]))
    case("automation/contact/missing-phone", a, body([{"first_name": "Ana", "variables": {"a": "b"}}]))
    case("automation/contact/phone-types", a, body([{"phone": 393331234567}, {"phone": None}, {"phone": True}, {"phone": ["+1234567"]}]))
    case("automation/contact/names-not-strings", a, body([dict(contact, first_name=1, last_name=["x"])]))
    case("automation/contact/name-lone-surrogate", a, '{"automation_id":1,"contacts":[{"phone":"+1234567","first_name":"A\\ud800na"}]}')
    case("automation/contact/many-keys-duplicate-late", a, '{"automation_id":1,"contacts":[{"phone":"1",' + ",".join('"k%d":%d' % (i, i) for i in range(20)) + ',"phone":"+1234567","k3":"x"}]}')
    for label, v in [("list", [["a", "b"]]), ("string", "a=b"), ("int", 1), ("bool", True)]:
        case("automation/variables/not-a-dict-%s" % label, a, body([dict(contact, variables=v)]))
    case("automation/variables/values-not-strings", a, body([dict(contact, variables={"a": 1, "b": None, "c": True, "d": [], "e": {}, "f": 1.5, "g": "ok"})]))
    case("automation/variables/nested-error-position", a, body([contact, contact, contact, dict(contact, variables={"ok": "1", "bad": 2})]))
    case("automation/variables/key-lone-surrogate", a, '{"automation_id":1,"contacts":[{"phone":"+1234567","variables":{"k\\udc00":"v","\\ud83d\\ude00":"ok"}}]}')
    case("automation/variables/key-and-value-lone-surrogate", a, '{"automation_id":1,"contacts":[{"phone":"+1234567","variables":{"\\ud800":"\\udfff"}}]}')
    case("automation/variables/sa-key-echo", a, '{"automation_id":1,"contacts":[{"variables":{"_sa":"x","a":"b"}}]}')
    for label, v in [("object", {"phone": "+1234567"}), ("string", "x"), ("null", None), ("int", 3)]:
        case("automation/contacts/not-a-list-%s" % label, a, {"automation_id": 1, "contacts": v})

    # automation_id
    for label, v in [("str", "5"), ("float", 5.0), ("true", True), ("big", 2**64), ("negative", -1)]:
        case("automation/automation_id/ok-%s" % label, a, {"automation_id": v, "contacts": []})
    for label, v in [("float", 5.5), ("str", "five"), ("null", None), ("list", [])]:
        case("automation/automation_id/bad-%s" % label, a, {"automation_id": v, "contacts": []})

    # many errors at once, in field order
    case(
        "automation/mixed/many-errors",
        a,
        {
            "url2": "nope",
            "contacts": [
                {"phone": "1", "first_name": "a" * 300, "variables": {"k" * 101: 5}},
                "x",
                {"first_name": None},
                dict(full, image_url="ftp://x"),
            ],
            "image_url": 5,
            "automation_id": "abc",
        },
    )
    case("automation/missing/everything", a, {})
    case("automation/body/array", a, [contact])
    case("automation/body/empty", a, b"")
    case("automation/body/null", a, "null")
    case("automation/malformed/truncated", a, '{"automation_id":1,"contacts":[{"phone":"+1234567"')
    case("automation/malformed/bad-escape-in-key", a, '{"automation_id":1,"contacts":[{"ph\\one":"x"}]}')
    case("automation/content-type/form", a, "automation_id=1&contacts=x", "application/x-www-form-urlencoded")


def build_cases():
    campaign_cases()
    automation_cases()
    names = [c[0] for c in CASES]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise SystemExit("duplicate case names: %s" % sorted(dupes))


def encode_case(name, endpoint, body, content_type):
    out = {"name": name, "endpoint": endpoint, "content_type": content_type}
    try:
        out["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        out["body_b64"] = base64.b64encode(body).decode()
    out["expect"] = outcome(endpoint, body, content_type)
    return out


def script_sha256():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    if sys.version_info[:2] not in ((3, 11), (3, 12)):
        # The Go scanner reports CPython 3.11/3.12's messages; 3.13 changed
        # the one for a trailing comma.
        raise SystemExit("run with CPython 3.11 or 3.12, not %s" % sys.version.split()[0])
    # The depth POLICY keeps nesting at MAX_DEPTH; the helpers above recurse a
    # few frames per level, more than Python's default limit allows.
    sys.setrecursionlimit(20000)
    if sys.argv[1:] == ["--eval"]:
        # One request per line: {"endpoint", "body_b64", "content_type"}.
        for line in sys.stdin:
            req = json.loads(line)
            body = base64.b64decode(req["body_b64"])
            res = outcome(req["endpoint"], body, req.get("content_type", "application/json"))
            sys.stdout.write(json.dumps(res, ensure_ascii=True) + "\n")
            sys.stdout.flush()
        return
    build_cases()
    table = {
        "generator_sha256": script_sha256(),
        "python": sys.version.split()[0],
        "pydantic": pydantic.VERSION,
        "pydantic_core": pydantic_core.__version__,
        "cases": [encode_case(*c) for c in CASES],
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(table, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print("wrote %d cases to %s" % (len(table["cases"]), path))


if __name__ == "__main__":
    main()
