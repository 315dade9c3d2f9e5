"""(a) of bench/overhead.py: a plain hand-written Keras script, what a user writes without
generic-trainer.

Reads <examples>/Split-train and Split-eval with tf.data, trains the shared model, validates once
per epoch, exports a serving SavedModel to <model-dir>/Format-Serving, prints the final metrics.
It logs the time of its first training step the way the runtime does, so the bench compares alike.

  .venv/bin/python bench/overhead_plain.py --examples DIR --model-dir DIR [--batch-size 128]
  [--epochs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import overhead_model  # noqa: E402


def process_uptime() -> float:
    """Seconds since this process started (the same /proc arithmetic as
    generic_trainer.fit.fit_hooks)."""
    with open("/proc/self/stat", encoding="ascii") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime", encoding="ascii") as f:
        return float(f.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--units", type=int, default=32, help="width of the two hidden layers")
    parser.add_argument("--train-steps", type=int, help="stop each epoch after this many batches")
    parser.add_argument(
        "--tensorboard", metavar="DIR", help="add TensorBoard(log_dir=DIR, update_freq='epoch')"
    )
    args = parser.parse_args()

    import keras

    class Timing(keras.callbacks.Callback):
        """The two lines of the runtime's progress log the bench reads: first step and epoch
        rate."""

        async_safe = True  # keeps Keras' asynchronous callback dispatch, as with no callback at all

        def __init__(self):
            super().__init__()
            self.first_done = False

        def on_epoch_begin(self, epoch, logs=None):
            self.start, self.steps = time.monotonic(), 0

        def on_train_batch_end(self, batch, logs=None):
            self.steps = max(self.steps, batch + 1)
            if not self.first_done:
                self.first_done = True
                print(
                    f"first training step done ({process_uptime():.1f} s after process start)",
                    file=sys.stderr,
                    flush=True,
                )

        def on_epoch_end(self, epoch, logs=None):
            took = time.monotonic() - self.start
            print(
                f"epoch {epoch + 1}/{args.epochs} done in {took:.1f} s ({self.steps / took:.1f} "
                "steps/s)",
                file=sys.stderr,
                flush=True,
            )

    train = overhead_model.dataset(
        [os.path.join(args.examples, "Split-train", "*")], args.batch_size
    )
    evaluation = overhead_model.dataset(
        [os.path.join(args.examples, "Split-eval", "*")], args.batch_size, shuffle=False
    )
    if args.train_steps:
        train = train.take(args.train_steps)
    model = overhead_model.build_model(args.units)
    callbacks = [Timing()]
    if args.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(log_dir=args.tensorboard, update_freq="epoch"))
    history = model.fit(
        train, epochs=args.epochs, validation_data=evaluation, callbacks=callbacks, verbose=0
    )
    overhead_model.export_serving(model, os.path.join(args.model_dir, "Format-Serving"))
    print(json.dumps({k: float(v[-1]) for k, v in history.history.items()}))


if __name__ == "__main__":
    main()
