"""The manual: README as the front door, docs/ as an mkdocs site, its reference generated from the
declarations."""

import argparse
import importlib.util
import re
import subprocess
import sys

from conftest import REPO

DOCS = REPO / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_what_the_declarations_generate():
    stale = _generator().stale()
    assert stale == [], f"{stale} out of date: run python docs/gen_reference.py"


def test_the_cli_reference_names_every_flag_of_every_verb():
    from generic_trainer import cli

    page = (DOCS / "reference" / "cli.md").read_text()
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for verb, parser in sub.choices.items():
        section = page.split(f"\n## {verb}\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in section, (
                        f"{verb} {flag} missing from docs/reference/cli.md"
                    )


def test_the_component_reference_names_every_component_input_and_output():
    from generic_trainer import cli
    from generic_trainer.intake import options

    page = (DOCS / "reference" / "components.md").read_text()
    for verb in cli.DECLARATIONS:
        if verb.component:
            section = page.split(f"\n## {verb.component.function}\n", 1)[1].split("\n## ", 1)[0]
            for name, _ in options.component_params(verb):
                assert f"| `{name}` |" in section, f"{verb.component.function}.{name} missing"


def test_the_fn_args_reference_has_every_field_with_its_meaning():
    import dataclasses

    from generic_trainer.fit.fn_args import FnArgs

    page = (DOCS / "reference" / "fn-args.md").read_text()
    for field in dataclasses.fields(FnArgs):
        row = next(line for line in page.splitlines() if line.startswith(f"| `{field.name}` |"))
        assert not row.endswith("|  |"), f"FnArgs.{field.name} has no meaning in its docstring"


def test_the_site_builds_strictly(tmp_path):
    """mkdocs --strict: every page in the nav, every link and anchor resolves."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(REPO / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


def test_the_readme_is_a_front_door_whose_links_resolve():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert text.index("make demo") < 400 and text.index("make test") < 400
    links = re.findall(r"\]\((?!https?:)([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        assert (REPO / link).exists(), f"README links to {link}, which does not exist"


def test_the_guides_flag_tables_name_only_flags_that_exist():
    """A guide's hand-written flag table explains flags; one a verb no longer has is a stale
    page."""
    from generic_trainer import cli

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {
        s for parser in sub.choices.values() for a in parser._actions for s in a.option_strings
    }
    named = {
        (page.name, flag)
        for page in DOCS.glob("*/*.md")
        if page.parent.name != "reference"
        for line in page.read_text().splitlines()
        if line.startswith("| `--")
        for flag in re.findall(r"`(--[a-z][a-z0-9-]*)", line.split(" | ")[0])
    }
    assert named, "no flag tables found"
    stale = sorted((page, flag) for page, flag in named if flag not in flags)
    assert stale == [], f"flags named in the guides that no verb has: {stale}"
