"""A user module's source read and parsed without running it, under a size and a recursion bound.

`parse` is the one reader of module source: the loader's syntax check (`user_module.check_syntax`)
and `--keras auto` (`keras_auto`) both call it, so a hostile module ends the same way whichever
reads it first: a UserInputError (exit 2) naming the file and what is wrong. It reads at most
`MAX_SOURCE_BYTES`; a NUL byte is named as such; the encoding is the one its PEP 263 coding cookie
declares (UTF-8 without one); nesting too deep for Python's parser or compiler (a RecursionError or
MemoryError inside them) is refused, never left to crash the runtime.
"""

from __future__ import annotations

import ast
import codecs
import io
import tokenize

from generic_trainer.artifacts import files
from generic_trainer.errors import UserInputError

INPUT = "--module-file"
MAX_SOURCE_BYTES = 8 * 1024 * 1024  # a module file's source (the largest TFX module is 40 KB)


def parse(path: str, input_name: str = INPUT, compile_it: bool = True) -> ast.Module:
    """The syntax tree of the module file `path`, checked as Python would import it.

    Args:
      path: a local .py file.
      input_name: the input named in errors.
      compile_it: also compile the tree (what importing does next), so compile-time errors surface.

    Returns:
      The parsed module; UserInputError (exit 2) for anything Python could not import.
    """
    try:
        data = files.read_bounded(path, MAX_SOURCE_BYTES)
    except files.UnreadableFile as e:
        raise UserInputError(input_name, str(e)) from None
    except OSError as e:
        raise UserInputError(input_name, f"{path} cannot be read: {e.strerror or e}") from None
    source = decode(data, path, input_name)
    try:
        tree = ast.parse(source, path)
        if compile_it:
            compile(tree, path, "exec")
    except SyntaxError as e:
        code = (e.text or "").strip()
        shown = f" ({code!r})" if code else ""
        raise UserInputError(
            input_name, f"syntax error in {path} line {e.lineno}: {e.msg}{shown}"
        ) from None
    except (RecursionError, MemoryError) as e:
        raise UserInputError(
            input_name,
            f"{path} nests expressions or statements too deeply for Python to compile "
            f"({type(e).__name__}); split the deep expression into steps",
        ) from None
    return tree


def decode(data: bytes, path: str, input_name: str = INPUT) -> str:
    """The text of module source `data`, in the encoding its PEP 263 cookie declares (else
    UTF-8)."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise UserInputError(
            input_name,
            f"{path} holds a NUL byte (byte {nul}, line {line}): Python source cannot contain NUL "
            "bytes (a binary file, or a file damaged in transfer?)",
        )
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:  # an unknown encoding, or lines 1-2 not UTF-8 without a cookie
        if "invalid or missing encoding" not in str(e):
            raise UserInputError(input_name, f"{path}: {e} (its PEP 263 coding cookie)") from None
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as e:
        how = "UTF-8" if codecs.lookup(encoding).name == "utf-8" else encoding
        raise UserInputError(
            input_name,
            f"{path} is not valid {how} Python source ({e}); Python reads source as UTF-8 unless "
            "a coding cookie (PEP 263: '# -*- coding: latin-1 -*-' on line 1 or 2) says otherwise",
        ) from None
    return text[1:] if text.startswith("\ufeff") else text
