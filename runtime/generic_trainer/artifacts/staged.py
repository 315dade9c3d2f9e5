"""An output directory written privately, then published whole: `StagedDir`.

    with StagedDir(final_dir) as stage:
        write_into(stage.path)
        before_publish(result)  # the executor output: a failure here publishes nothing
        stage.publish()         # renamed into place whole (storage.publish_dir)

Leaving the block without `publish()` (an exception) removes what was staged; `final_dir` is then
as it was. The staging dir is a private sibling (`storage.staging_dir_for`), so publishing is one
rename on the same file system; `outputs.exclusive` on the same dir removes one a killed run left.
"""

from __future__ import annotations

import logging
import os
import shutil

from generic_trainer.artifacts import storage

log = logging.getLogger(__name__)


class StagedDir:
    """A private staging dir for `final_dir`, removed on exit, published by `publish()`.

    Args:
        final_dir: the output dir the staged content replaces, whole.
        beside: the dir whose sibling holds the staging (default: `final_dir`); give the locked
            output dir when `final_dir` lies inside it (export-tflite's `<output>/Format-TFLite`).
    """

    def __init__(self, final_dir: str, beside: str | None = None):
        self.final_dir = os.path.normpath(final_dir)
        self.root = storage.staging_dir_for(beside or final_dir)
        self.path = (
            self.root if beside is None else os.path.join(self.root, os.path.basename(final_dir))
        )

    def __enter__(self) -> StagedDir:
        os.makedirs(self.path)
        return self

    def publish(self) -> None:
        """Move the staged dir into place, replacing an older `final_dir` whole."""
        storage.publish_dir(self.path, self.final_dir)
        log.info("published %s", self.final_dir)

    def __exit__(self, *exc_info: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
