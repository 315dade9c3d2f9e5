"""An output directory written privately, then published whole: `StagedDir`, the one way a verb
publishes an output dir (tune, export-tflite, push, evaluate, the blessings, import-examples,
transform, bulk-infer; train's model dir is published in parts by trained/publisher.py).

    with StagedDir(final_dir) as stage:
        write_into(stage.path)
        before_publish(result)  # the executor output: a failure here publishes nothing
        stage.publish()         # renamed into place whole (storage.publish_dir)

Leaving the block without `publish()` (an exception) removes what was staged; `final_dir` is then
as it was. The staging dir is a private sibling (`storage.staging_dir_for`), so publishing is one
rename on the same file system; `outputs.exclusive` on the same dir removes one a killed run left.
A gs:// `final_dir` (a remote Beam runner writes there) is staged under a sibling prefix and
published file by file with Beam's FileSystems, the last step of the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid

from generic_trainer.artifacts import storage

log = logging.getLogger(__name__)


class StagedDir:
    """A private staging dir for `final_dir`, removed on exit, published by `publish()`.

    Args:
        final_dir: the output dir the staged content replaces, whole (a local path or gs://).
        beside: the dir whose sibling holds the staging (default: `final_dir`); give the locked
            output dir when `final_dir` lies inside it (export-tflite's `<output>/Format-TFLite`).
    """

    def __init__(self, final_dir: str, beside: str | None = None):
        self.remote = storage.is_gcs_uri(final_dir)
        self.published = False
        if self.remote:
            self.final_dir = final_dir.rstrip("/")
            self.root = self.path = f"{self.final_dir}.staging-{uuid.uuid4().hex[:8]}"
            return
        self.final_dir = os.path.normpath(final_dir)
        self.root = storage.staging_dir_for(beside or final_dir)
        self.path = (
            self.root if beside is None else os.path.join(self.root, os.path.basename(final_dir))
        )

    def __enter__(self) -> StagedDir:
        if not self.remote:  # a gs:// prefix needs no creating
            os.makedirs(self.path)
        return self

    def publish(self) -> None:
        """Move the staged dir into place, replacing an older `final_dir` whole."""
        if self.remote:
            _rename_remote(self.path, self.final_dir)
        else:
            storage.publish_dir(self.path, self.final_dir)
        self.published = True
        log.info("published %s", self.final_dir)

    def __exit__(self, *exc_info: object) -> None:
        if not self.remote:
            shutil.rmtree(self.root, ignore_errors=True)
        elif not self.published:
            from apache_beam.io.filesystems import FileSystems

            with contextlib.suppress(Exception):  # nothing was written, or it is gone already
                FileSystems.delete([self.root + "/"])


def _rename_remote(staging: str, final_dir: str) -> None:
    """Each file under the `staging` prefix renamed to the same place under `final_dir`."""
    from apache_beam.io.filesystems import FileSystems

    sources = [m.path for m in FileSystems.match([staging + "/**"])[0].metadata_list]
    FileSystems.rename(sources, [final_dir + s[len(staging) :] for s in sources])
