"""Masking secrets in what a run writes: the supervisor's relay of the child's output, and log
records.

`Masker` replaces every known secret value (redaction's secret list, in each form it may be
printed: as written, JSON-escaped once or twice, as `repr` shows it) and the userinfo of every URL
with `***`. `relay` masks the whole stream, not each chunk it reads: bytes at the end of what it
has that could begin a secret are held back until the next bytes show whether they do, so a token
printed in two writes, or cut by the 1 MiB bound on a line, is masked all the same.
`MaskingFilter` masks log records (a verb run in this process). Standard library and redaction only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
from collections.abc import Iterable
from typing import Any, BinaryIO

from generic_trainer.artifacts.redaction import URL_USERINFO

MAX_LINE = 1 << 20  # a line longer than this is relayed in pieces
_URL_USERINFO = re.compile(URL_USERINFO.pattern.encode("ascii"))


def as_bytes(text: str) -> set[bytes]:
    """The bytes `text` is written as: UTF-8, with undecodable bytes (surrogate escapes) as they
    were
    read and lone surrogates as Python's `surrogatepass` writes them; never raises."""
    forms = {text.encode("utf-8", "surrogatepass")}
    try:
        forms.add(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        pass  # a lone surrogate outside the escape range: only its surrogatepass form
    return forms


class Masker:
    """Replaces every secret value, and every URL's userinfo, in the bytes it is given with
    `***`."""

    def __init__(self, secrets: Iterable[str]):
        forms = set()
        for secret in secrets:  # as written, and as JSON (once or twice escaped) or repr() shows it
            once = json.dumps(secret)[1:-1]
            forms |= {secret, once, json.dumps(once)[1:-1], repr(secret)[1:-1]}
        encoded = {b for form in forms if form for b in as_bytes(form)}
        self.secrets = sorted(encoded, key=len, reverse=True)

    def __call__(self, data: bytes) -> bytes:
        for secret in self.secrets:
            data = data.replace(secret, b"***")
        return _URL_USERINFO.sub(rb"\1***@", data)

    def text(self, text: str) -> str:
        """`text` with its secrets masked."""
        return self(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def held(self, data: bytes) -> int:
        """How many bytes at the end of `data` begin a secret without completing it (to hold
        back)."""
        longest = 0
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(data)), longest, -1):
                if data.endswith(secret[:size]):
                    longest = size
                    break
        return longest


def mask_value(value: Any, mask: Masker) -> Any:
    """A JSON value (a run's printed summary) with every string in it masked, keys included.

    Args:
        value: dicts, lists and scalars.
        mask: the run's secrets.

    Returns:
        A copy, each string masked (the JSON stays valid: a secret is masked inside its string).
    """
    if isinstance(value, str):
        return mask.text(value)
    if isinstance(value, dict):
        return {mask_value(k, mask): mask_value(v, mask) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(v, mask) for v in value]
    return value


class MaskingFilter(logging.Filter):
    """A logging filter masking secret values in each record (for a verb run without the supervisor:
    in-process `cli.main(argv)`, GENERIC_TRAINER_SUPERVISE=0)."""

    def __init__(self, secrets: Iterable[str]):
        super().__init__()
        self.mask = Masker(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        masked = self.mask.text(text)
        if masked != text:
            record.msg, record.args = masked, ()
        return True


def _next_out(pending: bytes, chunk: bytes | None, mask: Masker) -> tuple[bytes, bytes]:
    """(masked bytes to write now, bytes kept for later) once `chunk` was read (b"": the end of the
    stream; None: nothing came for a while)."""
    if chunk == b"":
        return mask(pending), b""
    cut = len(pending)
    if chunk is not None and len(pending) <= MAX_LINE:
        cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1  # whole lines at once
    cut -= mask.held(pending[:cut])  # the start of a secret waits for the bytes after it
    return mask(pending[:cut]), pending[cut:]


def relay(
    source: int,
    sink: BinaryIO,
    mask: Masker,
    idle_s: float = 0.5,
    hidden: re.Pattern[bytes] | None = None,
) -> None:
    """Copy `source` (a pipe's fd) to `sink` until EOF, masked; whole lines at once (a partial line
    waits at most `idle_s`, a line over MAX_LINE is written in pieces), and never a secret split
    between two writes. Lines matching `hidden` are dropped. Writing stops if `sink` fails;
    reading never does."""
    pending, writable = b"", True
    poller = select.poll()
    poller.register(source, select.POLLIN | select.POLLHUP)
    while True:
        ready = poller.poll(idle_s * 1000)
        chunk = os.read(source, 65536) if ready else None
        out, pending = _next_out(pending + (chunk or b""), chunk, mask)
        if hidden is not None:  # whole lines only: `out` ends at a line's end but for long lines
            out = hidden.sub(b"", out)
        if out and writable:
            try:
                sink.write(out)
                sink.flush()
            except (OSError, ValueError):
                writable = False  # the reader went away (`| head`): keep draining the child
        if chunk == b"":
            return
