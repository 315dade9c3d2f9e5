"""ExampleGen's spans and versions: `{SPAN}`, `{VERSION}` and `{YYYY}{MM}{DD}` in input patterns.

TFX's rules (tfx/components/example_gen/utils.py and input_processor.py), without Beam or TFX:
- A pattern holds at most one `{SPAN}` (or `{SPAN:W}`, W digits zero-padded), or exactly one of
  each of `{YYYY}`, `{MM}`, `{DD}` (the span is then days since 1970-01-01), never both; at most one
  `{VERSION}` (or `{VERSION:W}`), and only beside a span or date. Every split's pattern has the
  same specs.
- Without a range config the latest span is taken, and in it the latest version; every split must
  find the same span and version. A static range (`start_span_number` == `end_span_number`, as TFX
  requires) takes that span (its latest version); a rolling range of one span is the default. A
  range config without a span or date spec is an error.
- Matching: the specs become `*` in a glob and capture groups in a regex (`.{W}` with a width, else
  greedy); a file whose captured span or version is not a number is an error, as in TFX.
- The fingerprint is TFX's: per split `split:NAME,num_files:N,total_bytes:B,xor_checksum:X,
  sum_checksum:S` over the files' mtimes in whole seconds, the splits joined by newlines.

Errors are ValueErrors whose message the caller puts behind the input's name.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

SPAN_FULL_REGEX = r"{SPAN}|{SPAN:(?P<width>.*?)}"
VERSION_FULL_REGEX = r"{VERSION}|{VERSION:(?P<width>.*?)}"
DATE_SPECS = ("{YYYY}", "{MM}", "{DD}")
_EPOCH = datetime.datetime(1970, 1, 1)

Glob = Callable[[str], list[str]]


@dataclasses.dataclass(frozen=True)
class Specs:
    """Which specs a pattern holds."""

    span: bool
    date: bool
    version: bool


@dataclasses.dataclass(frozen=True)
class Resolved:
    """The patterns with their specs filled, the span and version taken, and TFX's fingerprint."""

    patterns: tuple[tuple[str, str], ...]  # (split, pattern)
    span: int
    version: int | None
    fingerprint: str


def pattern_specs(pattern: str) -> Specs:
    """The specs of one pattern, checked as TFX's verify_split_pattern_specs does."""
    spans = re.findall(SPAN_FULL_REGEX, pattern)
    versions = re.findall(VERSION_FULL_REGEX, pattern)
    date = any(spec in pattern for spec in DATE_SPECS)
    if spans and date:
        raise ValueError(f"either {{SPAN}} or the date specs, not both, in {pattern}")
    if len(spans) > 1:
        raise ValueError(f"only one {{SPAN}} is allowed in {pattern}")
    if date and not all(pattern.count(spec) == 1 for spec in DATE_SPECS):
        raise ValueError(f"exactly one each of {{YYYY}}, {{MM}} and {{DD}} is needed in {pattern}")
    if versions and not (spans or date):
        raise ValueError(f"{{VERSION}} needs a {{SPAN}} or date spec beside it in {pattern}")
    if len(versions) > 1:
        raise ValueError(f"only one {{VERSION}} is allowed in {pattern}")
    for regex, name in ((SPAN_FULL_REGEX, "SPAN"), (VERSION_FULL_REGEX, "VERSION")):
        _width(regex, name, pattern)
    return Specs(bool(spans), date, bool(versions))


def _width(regex: str, name: str, pattern: str) -> int | None:
    match = re.search(regex, pattern)
    if not match or not match.group("width"):
        return None
    text = match.group("width")
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"the width in {{{name}:{text}}} is not a positive integer: {pattern}")
    return int(text)


def check_range_config(config: Mapping[str, Any] | None) -> int | None:
    """The static span a range config takes, or None (the latest); ValueError as TFX's."""
    if not config:
        return None
    if set(config) - {"static_range", "rolling_range"} or len(config) != 1:
        raise ValueError(
            'expected {"static_range": {"start_span_number": N, "end_span_number": N}} or '
            f'{{"rolling_range": {{"num_spans": 1}}}}, got {config!r}'
        )
    inner = next(iter(config.values())) or {}
    if not isinstance(inner, Mapping):
        raise ValueError(f"{next(iter(config))} must be a JSON object, got {inner!r}")
    if "rolling_range" in config:
        rolling = inner
        if _number(rolling, "num_spans", 0) != 1 or _number(rolling, "start_span_number", 0) > 0:
            raise ValueError("rolling_range supports num_spans 1 and no start_span_number (TFX's)")
        return None
    static = inner
    start, end = _number(static, "start_span_number"), _number(static, "end_span_number")
    if start != end:
        raise ValueError(
            f"static_range start_span_number ({start}) and end_span_number ({end}) must be "
            "equal: one span is read (TFX's rule)"
        )
    return start


def _number(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ValueError(f"{key} must be a whole number, got {value!r}")
    return int(value)


def span_to_date(span: int) -> tuple[str, str, str]:
    """Span -> ('YYYY', 'MM', 'DD'), days since 1970-01-01."""
    date = _EPOCH + datetime.timedelta(days=span)
    return f"{date.year:04d}", f"{date.month:02d}", f"{date.day:02d}"


def _glob_to_regex(pattern: str) -> str:
    """TFX's _glob_to_regex."""
    for old, new in (
        ("\\", "\\\\"),
        (".", r"\."),
        ("+", r"\+"),
        ("*", r"[^\\/]*"),
        ("?", r"[^\\/]"),
        ("(", r"\("),
        (")", r"\)"),
    ):
        pattern = pattern.replace(old, new)
    return pattern


def _padded(value: int, width: int | None, what: str) -> str:
    text = str(value)
    if width is not None and width < len(text):
        raise ValueError(f"the {what} width {width} is less than the digits of {value}")
    return text.zfill(width) if width else text


def _glob_and_regex(pattern: str, specs: Specs, static: int | None) -> tuple[str, str]:
    """TFX's _create_matching_glob_and_regex."""
    glob, regex = pattern, _glob_to_regex(pattern)
    if specs.span:
        width = _width(SPAN_FULL_REGEX, "SPAN", pattern)
        glob_part, regex_part = "*", (f".{{{width}}}" if width else ".*")
        if static is not None:
            glob_part = regex_part = _padded(static, width, "span")
        glob = re.sub(SPAN_FULL_REGEX, glob_part, glob)
        regex = re.sub(SPAN_FULL_REGEX, f"(?P<span>{regex_part})", regex)
    elif specs.date:
        parts = span_to_date(static) if static is not None else None
        for i, (spec, name, size) in enumerate(
            zip(DATE_SPECS, ("year", "month", "day"), (4, 2, 2), strict=True)
        ):
            glob = glob.replace(spec, parts[i] if parts else "*")
            regex = regex.replace(spec, f"(?P<{name}>{parts[i] if parts else f'.{{{size}}}'})")
    if specs.version:
        width = _width(VERSION_FULL_REGEX, "VERSION", pattern)
        glob = re.sub(VERSION_FULL_REGEX, "*", glob)
        regex = re.sub(
            VERSION_FULL_REGEX, f"(?P<version>{f'.{{{width}}}' if width else '.*'})", regex
        )
    return glob, regex


def _span_of(path: str, regex: str, specs: Specs) -> tuple[list[str], int, str | None]:
    """(span tokens, span, version token) of a file; ValueError as TFX's."""
    match = re.search(regex, path)
    if match is None:
        raise ValueError(f"{path} does not match {regex}")
    if specs.span:
        tokens = [match.group("span")]
        if not tokens[0].isdigit():
            raise ValueError(f"cannot find a span number in {path} (found {tokens[0]!r})")
        span = int(tokens[0])
    else:
        tokens = [match.group(n) for n in ("year", "month", "day")]
        try:
            span = (datetime.datetime(*(int(t) for t in tokens)) - _EPOCH).days
        except ValueError:
            raise ValueError(f"{path}: {'-'.join(tokens)} is not a date") from None
    version = match.group("version") if specs.version else None
    if version is not None and not version.isdigit():
        raise ValueError(f"cannot find a version number in {path} (found {version!r})")
    return tokens, span, version


def _latest(
    name: str, pattern: str, specs: Specs, static: int | None, glob: Glob
) -> tuple[list[str], int, str | None]:
    """TFX's _get_target_span_version: the latest span, and its latest version, matching
    `pattern`."""
    glob_pattern, regex = _glob_and_regex(pattern, specs, static)
    best: tuple[list[str], int, str | None] | None = None
    for path in glob(glob_pattern):
        tokens, span, version = _span_of(path, regex, specs)
        if best is None or span > best[1]:
            best = (tokens, span, version)
        elif span == best[1] and (best[2] is None or int(version or 0) >= int(best[2])):
            best = (best[0], span, version)
    if best is None or (specs.version and best[2] is None):
        raise ValueError(f"no files match split {name!r}'s pattern {pattern} ({glob_pattern})")
    return best


def _fill(pattern: str, specs: Specs, tokens: Sequence[str], version: str | None) -> str:
    if specs.span:
        pattern = re.sub(SPAN_FULL_REGEX, lambda _: tokens[0], pattern)
    elif specs.date:
        for spec, token in zip(DATE_SPECS, tokens, strict=True):
            pattern = pattern.replace(spec, token)
    if specs.version and version is not None:
        pattern = re.sub(VERSION_FULL_REGEX, lambda _: version, pattern)
    return pattern


def fingerprint(name: str, files: Sequence[str], stat: Callable[[str], tuple[int, int]]) -> str:
    """TFX io_utils.generate_fingerprint of one split; `stat(path)` -> (bytes, mtime in seconds)."""
    total = xor = added = 0
    for path in files:
        size, mtime = stat(path)
        total, xor, added = total + size, xor ^ mtime, added + mtime
    return (
        f"split:{name},num_files:{len(files)},total_bytes:{total},xor_checksum:{xor},"
        f"sum_checksum:{added}"
    )


def resolve(
    splits: Sequence[tuple[str, str]],
    range_config: Mapping[str, Any] | None,
    glob: Glob,
    stat: Callable[[str], tuple[int, int]],
) -> Resolved:
    """Fill every split's span, date and version specs as TFX's ExampleGen driver does.

    `splits`: (name, pattern); `glob(pattern)` lists the files; ValueError as TFX's (module doc)."""
    specs = {pattern_specs(p) for _, p in splits}
    if len(specs) > 1:
        raise ValueError("every split's pattern needs the same specs ({SPAN}, date, {VERSION})")
    [spec] = specs
    static = check_range_config(range_config)
    if range_config and not (spec.span or spec.date):
        raise ValueError("a range config needs a {SPAN} or date spec in the input patterns")
    if not (spec.span or spec.date):
        prints = [fingerprint(n, glob(p), stat) for n, p in splits]
        return Resolved(tuple(splits), 0, None, "\n".join(prints))
    filled, chosen = [], None
    for name, pattern in splits:
        tokens, span, version = _latest(name, pattern, spec, static, glob)
        found = (span, int(version) if version is not None else None)
        if chosen is not None and found != chosen:
            raise ValueError(
                f"split {name!r} finds span {found[0]} version {found[1]}, another split span "
                f"{chosen[0]} version {chosen[1]}; the latest span and version must be the same "
                "for each split"
            )
        chosen = found
        filled.append((name, _fill(pattern, spec, tokens, version)))
    prints = [fingerprint(n, glob(p), stat) for n, p in filled]
    return Resolved(tuple(filled), chosen[0], chosen[1], "\n".join(prints))
