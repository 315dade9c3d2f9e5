"""What `train` would find on this machine, checked without training (the `doctor` verb's parts).

- `report.py`: one `Check` per line (ok / warn / fail, with the fix), the text and JSON forms;
- `elf_dynamic.py`: the dynamic section of a shared library (DT_NEEDED, RUNPATH / RPATH), stdlib
  only;
- `dlopen.py`: does every CUDA library TensorFlow opens resolve the way dlopen from its loader
  finds it (also `python -m generic_trainer.diagnose.dlopen SITE_PACKAGES`, which the image's build
  and test run);
- `machine.py`: Python, GPUs the machine shows, CUDA libraries, memory and disk, without TensorFlow;
- `tensorflow_checks.py`: the versions, the GPUs TensorFlow registers, XLA on each GPU (imports
  TensorFlow);
- `cluster_checks.py`: the strategy train would choose and the cluster it would join;
- `remote_inputs.py`: whether each gs:// / s3:// input can be listed.
"""
