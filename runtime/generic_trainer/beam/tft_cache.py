"""tf.Transform's analyzer cache as TFX's Transform keeps it (`tft_beam.analyzer_cache`).

Each analyze split of each Examples dir (a span) is one dataset, keyed as TFX keys it: the last
six parts of its file pattern and the pattern's sha256. A run given an earlier run's cache reads
the entries of the datasets it analyzes; a dataset whose every cacheable analyzer is in the cache
is not read for the analysis at all (TFT decides, `get_analysis_dataset_keys`). The updated cache
holds the input cache's entries of this run's datasets and the entries this run computed, so a
rolling window of spans analyzes only the span it has not seen.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

PATTERN_SUFFIX_PARTS = 6  # TFX's _Dataset._FILE_PATTERN_SUFFIX_LENGTH


def dataset_key(pattern: str, gcs_root: str = "/gcs") -> Any:
    """The cache's DatasetKey of a split's file pattern (a /gcs path keys as its gs:// URI).

    Args:
      pattern: the split's file pattern, `<examples>/Split-<name>/*`.
      gcs_root: where gs:// is mounted here.

    Returns:
      A `tft_beam.analyzer_cache.DatasetKey`.
    """
    from tensorflow_transform.beam import analyzer_cache

    root = gcs_root.rstrip("/") + "/"
    if "://" not in pattern and pattern.startswith(root):
        pattern = "gs://" + pattern[len(root) :]
    suffix = "/".join(pattern.split("/")[-PATTERN_SUFFIX_PARTS:])
    return analyzer_cache.DatasetKey(suffix + "-" + hashlib.sha256(pattern.encode()).hexdigest())


def read_cache(
    pipeline: Any, cache_dir: str | None, keys: Sequence[Any], fn: Callable, specs: Any
) -> Any:
    """The input cache of `keys` from `cache_dir` ({} when there is none: the run writes one)."""
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.beam import analyzer_cache

    if cache_dir is None:
        return {}
    entry_keys = tft_beam.analysis_graph_builder.get_analysis_cache_entry_keys(
        fn, specs, keys, False
    )
    return pipeline | "ReadCache" >> analyzer_cache.ReadAnalysisCacheFromFS(
        cache_dir, keys, cache_entry_keys=entry_keys
    )


def keys_to_read(fn: Callable, specs: Any, keys: Sequence[Any], input_cache: Any) -> set:
    """The dataset keys the analyzers still need read (the others come whole from the cache)."""
    import tensorflow_transform.beam as tft_beam

    needed = tft_beam.analysis_graph_builder.get_analysis_dataset_keys(
        fn, specs, keys, input_cache, False
    )
    return set(needed)


def write_cache(pipeline: Any, cache_output: Any, cache_dir: str, keys: Sequence[Any]) -> None:
    """Write the cache this run computed into `cache_dir` (merged with what it holds already)."""
    from tensorflow_transform.beam import analyzer_cache

    if cache_output:
        _ = cache_output | "WriteCache" >> analyzer_cache.WriteAnalysisCacheToFS(
            pipeline=pipeline, cache_base_dir=cache_dir, dataset_keys=keys
        )


def carry_over(input_dir: str | None, output_dir: str, keys: Sequence[Any]) -> list[str]:
    """Copy the input cache's entries of this run's datasets into the updated cache (as TFX does).

    Returns:
      The dataset keys copied.
    """
    copied = []
    for key in keys if input_dir else ():
        source = _join(input_dir, key.key)
        if _is_dir(source):
            _copy_tree(source, _join(output_dir, key.key))
            copied.append(key.key)
    return copied


def summary(keys: Sequence[Any], read: set, cache_given: bool) -> Mapping[str, Any]:
    """What the cache saved: dataset keys, how many came from the cache (not read)."""
    cached = [k.key for k in keys if k not in read] if cache_given else []
    if cache_given:
        log.info(
            "transform: analyzer cache: %d of %d analyze datasets come from the cache and are "
            "not analyzed again%s",
            len(cached),
            len(keys),
            f" ({', '.join(cached)})" if cached else "",
        )
    return {"dataset_keys": [k.key for k in keys], "cached_datasets": len(cached)}


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name if "://" in base else os.path.join(base, name)


def _is_dir(path: str) -> bool:
    if "://" not in path:
        return os.path.isdir(path)
    from apache_beam.io.filesystems import FileSystems

    return bool(FileSystems.match([path.rstrip("/") + "/**"])[0].metadata_list)


def _copy_tree(source: str, target: str) -> None:
    if "://" not in source and "://" not in target:
        shutil.copytree(source, target)
        return
    from apache_beam.io.filesystems import FileSystems

    files = [m.path for m in FileSystems.match([source.rstrip("/") + "/**"])[0].metadata_list]
    FileSystems.copy(files, [target.rstrip("/") + f[len(source.rstrip("/")) :] for f in files])
