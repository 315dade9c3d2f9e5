"""--examples is resolved into split file patterns once, at intake (intake/paths.split_patterns),
and every verb reads them from its request: no module outside intake/ expands them again."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runtime" / "generic_trainer"
EXPANDER = "split_file_patterns"  # records/example_files.py: `<dir>/Split-<name>/*` per split
ALLOWED = ("intake/", "records/example_files.py")  # the one caller, and where it is defined


def expansions(path: Path) -> list[int]:
    """Lines of `path` that call or import the split-pattern expander."""
    text = path.read_text(encoding="utf-8")
    if EXPANDER not in text:  # most modules: no need to parse them
        return []
    tree = ast.parse(text)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == EXPANDER for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == EXPANDER:
                lines.append(node.lineno)
    return sorted(lines)


def test_no_verb_or_part_expands_the_examples_splits_again():
    found = [
        f"{rel}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not (rel := path.relative_to(PACKAGE).as_posix()).startswith(ALLOWED)
        for line in expansions(path)
    ]
    assert found == [], (
        "read the request's split file patterns (resolved at intake):\n" + "\n".join(found)
    )


def test_the_expansion_check_finds_calls_and_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from generic_trainer.records.example_files import split_file_patterns\n"
        "from generic_trainer.records import example_files\n"
        "a = example_files.split_file_patterns('d', ['train'])\n"
        "b = split_file_patterns('d', ['eval'])\nc = example_files.split_files('d/*')\n"
    )
    assert expansions(sample) == [1, 3, 4]
