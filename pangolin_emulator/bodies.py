"""What express.json() makes of a request body (contract §1.4)."""

from __future__ import annotations

import json

from pangolin_emulator.errors import ApiError
from pangolin_emulator.validation import UNDEFINED

__all__ = ["parse_json_body"]


def _is_json_type(content_type: str | None) -> bool:
    if content_type is None:
        return False
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _v8_message(text: str, error: json.JSONDecodeError) -> str:
    """Approximate V8's JSON.parse wording for the common mistakes."""
    pos = error.pos
    if error.msg.startswith("Expecting property name"):
        return f"Expected property name or '}}' in JSON at position {pos}"
    if error.msg.startswith("Expecting ':'"):
        return f"Expected ':' after property name in JSON at position {pos}"
    if error.msg.startswith("Expecting ','"):
        closer = "]" if text.lstrip().startswith("[") else "}"
        return f"Expected ',' or '{closer}' after property value in JSON at position {pos}"
    if error.msg.startswith("Extra data"):
        return f"Unexpected non-whitespace character after JSON at position {pos}"
    if pos >= len(text.rstrip()):
        return "Unexpected end of JSON input"
    return f"Unexpected token '{text[pos]}', \"{text[:30]}\" is not valid JSON"


def parse_json_body(content_type: str | None, raw: bytes) -> object:
    """The parsed body, UNDEFINED without a JSON content type, or a 400 for malformed JSON."""
    if not _is_json_type(content_type):
        return UNDEFINED
    if not raw:
        return {}  # body-parser turns an empty JSON body into {}
    text = raw.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped and stripped[0] not in "{[":
        # body-parser's strict mode only accepts objects and arrays at the top level.
        raise ApiError(400, f"Unexpected token '{stripped[0]}', \"{stripped[:30]}\" is not valid JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(400, _v8_message(text, exc)) from exc
