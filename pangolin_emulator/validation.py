"""A small zod-v4 look-alike: strict schemas that report issues in Pangolin's exact wording.

Pangolin validates with zod 4 and formats with zod-validation-error, so a 400 reads
`Validation error: <issue> at "<path>"; <issue>`. Only the schema kinds the emulated routes
use are modelled. Numbers that arrive as JSON floats with an integral value count as ints,
as they do in JavaScript.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pangolin_emulator.errors import ApiError

__all__ = [
    "UNDEFINED",
    "Arr",
    "Bool",
    "CoerceNum",
    "Enum",
    "Int",
    "Issue",
    "Num",
    "Obj",
    "Schema",
    "Str",
    "invalid",
]

Path = tuple[str | int, ...]


class Undefined:
    """JavaScript `undefined`: a missing key or a body express did not parse."""

    _instance: Undefined | None = None

    def __new__(cls) -> Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = Undefined()


@dataclass(frozen=True)
class Issue:
    """One zod issue: message plus where it happened."""

    message: str
    path: Path = ()

    def render(self) -> str:
        if not self.path:
            return self.message
        parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path).lstrip(".")
        return f'{self.message} at "{parts}"'


def validation_error(issues: list[Issue]) -> ApiError:
    return ApiError(400, "Validation error: " + "; ".join(issue.render() for issue in issues))


def type_name(value: object) -> str:
    """zod's `parsedType`, the word after "received"."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "NaN" if isinstance(value, float) and math.isnan(value) else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def invalid(expected: str, value: object, path: Path) -> Issue:
    return Issue(f"Invalid input: expected {expected}, received {type_name(value)}", path)


def _as_number(value: object) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _bounds(value: float, lo: float | None, hi: float | None, lo_excl: bool, path: Path) -> list[Issue]:
    if lo is not None and (value <= lo if lo_excl else value < lo):
        return [Issue(f"Too small: expected number to be {'>' if lo_excl else '>='}{_js(lo)}", path)]
    if hi is not None and value > hi:
        return [Issue(f"Too big: expected number to be <={_js(hi)}", path)]
    return []


def _js(number: float) -> str:
    """Render a number the way JavaScript prints it (1.0 -> "1")."""
    return str(int(number)) if float(number).is_integer() else repr(number)


class Schema:
    """Base: `parse` returns the (possibly normalised) value and the issues found."""

    optional: bool = False
    nullable: bool = False
    default: object = UNDEFINED

    def parse(self, value: object, path: Path = ()) -> tuple[object, list[Issue]]:
        if value is UNDEFINED:
            if self.default is not UNDEFINED:
                return self.default, []
            if self.optional:
                return UNDEFINED, []
        if value is None and self.nullable:
            return None, []
        return self.check(value, path)

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        raise NotImplementedError


@dataclass
class Str(Schema):
    min_len: int | None = None
    max_len: int | None = None
    pattern: str | None = None
    refine: Callable[[str], bool] | None = None
    optional: bool = False
    nullable: bool = False
    default: object = UNDEFINED

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        if not isinstance(value, str):
            return value, [invalid("string", value, path)]
        # JavaScript measures length in UTF-16 code units.
        length = len(value.encode("utf-16-le")) // 2
        if self.min_len is not None and length < self.min_len:
            return value, [Issue(f"Too small: expected string to have >={self.min_len} characters", path)]
        if self.max_len is not None and length > self.max_len:
            return value, [Issue(f"Too big: expected string to have <={self.max_len} characters", path)]
        if self.pattern is not None and re.search(self.pattern, value) is None:
            return value, [Issue(f"Invalid string: must match pattern /{self.pattern}/", path)]
        if self.refine is not None and not self.refine(value):
            return value, [Issue("Invalid input", path)]
        return value, []


@dataclass
class Int(Schema):
    """`z.int()` / `z.number().int()` with bounds: `lo`/`hi` inclusive, `gt` exclusive."""

    lo: int | None = None
    hi: int | None = None
    gt: int | None = None
    optional: bool = False
    nullable: bool = False
    default: object = UNDEFINED

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        number = _as_number(value)
        if number is None or (isinstance(number, float) and math.isnan(number)):
            return value, [invalid("number", value, path)]
        if isinstance(number, float) and not number.is_integer():
            return value, [invalid("int", value, path)]
        lo = self.gt if self.gt is not None else self.lo
        return int(number), _bounds(number, lo, self.hi, self.gt is not None, path)


@dataclass
class Num(Schema):
    optional: bool = False
    nullable: bool = False

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        number = _as_number(value)
        if number is None:
            return value, [invalid("number", value, path)]
        return number, []


@dataclass
class Bool(Schema):
    optional: bool = False
    nullable: bool = False
    default: object = UNDEFINED

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        if not isinstance(value, bool):
            return value, [invalid("boolean", value, path)]
        return value, []


@dataclass
class Enum(Schema):
    values: tuple[str, ...] = ()
    optional: bool = False
    nullable: bool = False
    default: object = UNDEFINED

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        if value in self.values:
            return value, []
        if len(self.values) == 1:
            return value, [Issue(f"Invalid input: expected {json.dumps(self.values[0])}", path)]
        options = "|".join(json.dumps(v) for v in self.values)
        return value, [Issue(f"Invalid option: expected one of {options}", path)]


@dataclass
class Arr(Schema):
    item: Schema = field(default_factory=Schema)
    optional: bool = False
    nullable: bool = False

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        if not isinstance(value, list):
            return value, [invalid("array", value, path)]
        out: list[object] = []
        issues: list[Issue] = []
        for index, element in enumerate(value):
            parsed, found = self.item.parse(element, (*path, index))
            out.append(parsed)
            issues += found
        return out, issues


@dataclass
class CoerceNum(Schema):
    """A query-string integer: `z.coerce.number().int()`, NaN for anything unparseable; `lo` is
    inclusive, `gt` exclusive (`.positive()` is `gt=0`)."""

    lo: int | None = None
    gt: int | None = None
    optional: bool = True
    default: object = UNDEFINED

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        try:
            number = float(value) if isinstance(value, str) and value.strip() else math.nan
        except ValueError:
            number = math.nan
        if math.isnan(number):
            return value, [invalid("number", number, path)]
        if not number.is_integer():
            return value, [invalid("int", number, path)]
        lo = self.gt if self.gt is not None else self.lo
        return int(number), _bounds(number, lo, None, self.gt is not None, path)


Refine = Callable[[dict[str, object]], Issue | None]


@dataclass
class Obj(Schema):
    """A strict object (`z.strictObject`): unknown keys are one issue after the field issues."""

    fields: Mapping[str, Schema] = field(default_factory=dict)
    strict: bool = True
    refines: tuple[Refine, ...] = ()
    optional: bool = False
    nullable: bool = False

    def check(self, value: object, path: Path) -> tuple[object, list[Issue]]:
        if not isinstance(value, dict):
            return value, [invalid("object", value, path)]
        out: dict[str, object] = {}
        issues: list[Issue] = []
        for name, schema in self.fields.items():
            parsed, found = schema.parse(value.get(name, UNDEFINED), (*path, name))
            issues += found
            if parsed is not UNDEFINED:
                out[name] = parsed
        unknown = [key for key in value if key not in self.fields]
        if unknown and self.strict:
            plural = "s" if len(unknown) > 1 else ""
            issues.append(Issue(f"Unrecognized key{plural}: " + ", ".join(json.dumps(k) for k in unknown), path))
        if issues:
            return out, issues
        # zod skips refinements once the shape itself failed.
        for refine in self.refines:
            problem = refine(out)
            if problem is not None:
                return out, [problem]
        return out, []

    def validate(self, value: object) -> dict[str, object]:
        """Parse or raise the 400 Pangolin would send."""
        parsed, issues = self.parse(value)
        if issues or not isinstance(parsed, dict):
            raise validation_error(issues)
        return parsed
