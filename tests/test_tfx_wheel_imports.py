"""Every `tfx` import of every module file in the tfx 1.21 wheel resolves under the runtime's hook.

A module file is a file of the wheel that defines a module function TFX's components call
(run_fn, trainer_fn, tuner_fn, preprocessing_fn, stats_options_updater_fn), and every file of
its own tree it imports by a `tfx` path (penguin_utils_base, the templates' features, the BERT
utils), found as the hook finds them. Each import (at any depth, in functions too) must resolve:
a stand-in path is imported and its name taken; a path to a file of the module's tree must find
that file, which must define the name imported. Files of the tree are not run (they may need
libraries the image has not, as the BERT utils' tensorflow_text).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from generic_trainer import tfx_hook
from test_tfx_real_modules import tfx_root  # noqa: F401 - the wheel fixture

MODULE_FUNCTION = re.compile(
    r"^def (run_fn|trainer_fn|tuner_fn|preprocessing_fn|stats_options_updater_fn)\(", re.M
)


def _module_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in (root / "tfx").rglob("*.py")
        if not p.name.endswith("_test.py") and MODULE_FUNCTION.search(p.read_text(encoding="utf-8"))
    )


def _tfx_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of each `from tfx... import name`; (module, None) of each `import tfx...`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "tfx"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "tfx":
                found += [(node.module, a.name) for a in node.names]
    return found


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined = {
        getattr(n, "name", None) or getattr(n, "id", None)
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Name))
    }
    return name in defined


def _tree_file(module: str, name: str | None) -> Path | None:
    """The file of the module's tree an import names (a stand-in path never is one)."""
    full = f"{module}.{name}" if name else module
    if full in tfx_hook.MODULES or module in tfx_hook.MODULES:
        return None
    found = tfx_hook.module_file(full) or tfx_hook.module_file(module)
    return Path(found) if found else None


def _failure(module: str, name: str | None) -> str | None:
    """None when the import resolves; else why not."""
    tree = _tree_file(module, name)
    if tree is not None:
        if name and tree.stem != name and not _defines(tree, name):
            return f"{tree} does not define {name}"
        return None
    try:
        imported = importlib.import_module(module)
        if name is not None:
            getattr(imported, name)
    except (ImportError, AttributeError) as e:
        return str(e).split(":")[0]
    return None


def test_every_tfx_import_of_the_wheels_module_files_resolves(tfx_root):  # noqa: F811
    todo = _module_files(tfx_root)
    assert len(todo) >= 20, todo  # the wheel's module files were found
    seen, failures, checked = set(todo), [], 0
    while todo:
        path = todo.pop()
        tfx_hook.uninstall()
        assert tfx_hook.install(), "the real tfx package is installed here; this test assumes not"
        tfx_hook.add_module_dir(str(path.parent))
        for module, name in _tfx_imports(path):
            checked += 1
            tree = _tree_file(module, name)
            if tree is not None and tree not in seen:
                seen.add(tree)
                todo.append(tree)
            failure = _failure(module, name)
            if failure:
                where = path.relative_to(tfx_root)
                failures.append(f"{where}: {module} {name or ''}: {failure}")
    tfx_hook.uninstall()
    assert not failures, "\n".join(failures)
    assert checked >= 40 and len(seen) >= 25, (checked, len(seen))


@pytest.fixture
def stand_ins():
    assert tfx_hook.install()
    yield
    tfx_hook.uninstall()


def test_trainer_fn_args_and_stats_options_util_are_the_runtimes(stand_ins):
    from generic_trainer import tfx as runtime_tfx
    from generic_trainer.fit.fn_args import FnArgs
    from tfx.components.trainer.executor import TrainerFnArgs
    from tfx.components.transform import stats_options_util

    assert TrainerFnArgs is FnArgs
    assert stats_options_util.StatsType is runtime_tfx.StatsType
    assert stats_options_util.StatsType.POST_TRANSFORM.value == 2  # TFX's numbering


def test_a_cousin_file_of_the_tree_loads(tmp_path):
    """`.../bert/cola/m.py` imports `tfx.examples.bert.utils.helper`: `.../bert/utils/helper.py`."""
    root = tmp_path / "tfx" / "examples" / "bert"
    (root / "cola").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "utils" / "helper.py").write_text("VALUE = 7\n")
    tfx_hook.install()
    try:
        tfx_hook.add_module_dir(str(root / "cola"))
        from tfx.examples.bert.utils.helper import VALUE

        assert VALUE == 7
        # One common folder name is no tree: `components` alone does not lead down.
        assert tfx_hook.module_file("tfx.components.util.helper") is None
    finally:
        tfx_hook.uninstall()
