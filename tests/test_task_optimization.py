"""`trainer.optimizer_config` in Model Garden's one-of form: schedules, warm-ups, optimizers, the
flat form.

Every expected learning rate below is worked out by hand from Model Garden's definitions
(official/modeling/optimization/lr_schedule.py and the Keras schedules it wraps), written as
arithmetic here, never by calling the code under test.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from generic_trainer.errors import UserInputError
from generic_trainer.task import (
    ExperimentConfig,
    OptimizationConfig,
    OptimizerConfig,
    TrainerConfig,
    build_optimization_config,
    override,
)
from generic_trainer.task.resolve import build_experiment


def _lr(values: dict, train_steps: int = 100):
    from generic_trainer.task.schedules import build_learning_rate

    return build_learning_rate(build_optimization_config(values), train_steps)


def _at(lr, step: int) -> float:
    return float(lr(step)) if callable(lr) else float(lr)


def _check(lr, expected: dict[int, float]) -> None:
    got = {step: _at(lr, step) for step in expected}
    for step, value in expected.items():
        assert got[step] == pytest.approx(value, rel=1e-5, abs=1e-9), (step, got)


def test_stepwise_rates_after_a_linear_warmup_follow_model_garden():
    # ResNet-50 GPU shape: sgd momentum 0.9, stepwise, linear warm-up from 0 (warmup_learning_rate's
    # default)
    lr = _lr(
        {
            "optimizer": {"type": "sgd", "sgd": {"momentum": 0.9}},
            "learning_rate": {
                "type": "stepwise",
                "stepwise": {"boundaries": [10, 20], "values": [0.8, 0.08, 0.008]},
            },
            "warmup": {"type": "linear", "linear": {"warmup_steps": 5}},
        }
    )
    # warm-up: 0 + step / 5 * (schedule(5) - 0), schedule(5) = 0.8; then values[i] for step <=
    # boundaries[i]
    _check(
        lr,
        {
            0: 0.0,
            2: 2 / 5 * 0.8,
            4: 4 / 5 * 0.8,
            5: 0.8,
            10: 0.8,
            11: 0.08,
            20: 0.08,
            21: 0.008,
            500: 0.008,
        },
    )


def test_cosine_rates_after_a_linear_warmup_from_a_start_value_follow_model_garden():
    lr = _lr(
        {
            "learning_rate": {
                "type": "cosine",
                "cosine": {"initial_learning_rate": 0.1, "decay_steps": 100},
            },
            "warmup": {
                "type": "linear",
                "linear": {"warmup_steps": 10, "warmup_learning_rate": 0.01},
            },
        }
    )
    end_of_warmup = (
        0.1 * 0.5 * (1 + math.cos(math.pi * 10 / 100))
    )  # the schedule's own value at step 10
    _check(
        lr,
        {
            0: 0.01,
            4: 0.01 + 4 / 10 * (end_of_warmup - 0.01),
            10: end_of_warmup,
            50: 0.1 * 0.5 * (1 + math.cos(math.pi / 2)),
            100: 0.0,
            150: 0.0,
        },
    )
    alpha = _lr(
        {
            "learning_rate": {
                "type": "cosine",
                "cosine": {
                    "initial_learning_rate": 0.1,
                    "decay_steps": 100,
                    "alpha": 0.1,
                    "offset": 20,
                },
            }
        }
    )
    # offset: the cosine sees step - 20; alpha: the floor is alpha * initial
    _check(
        alpha,
        {
            20: 0.1,
            70: 0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * 50 / 100)) + 0.1),
            120: 0.1 * 0.1,
            300: 0.01,
        },
    )


def test_polynomial_decay_after_a_polynomial_warmup_follows_model_garden():
    # BERT's shape: adamw, polynomial decay, polynomial warm-up
    lr = _lr(
        {
            "optimizer": {"type": "adamw"},
            "learning_rate": {
                "type": "polynomial",
                "polynomial": {
                    "initial_learning_rate": 1.0,
                    "decay_steps": 100,
                    "end_learning_rate": 0.0,
                    "power": 1.0,
                },
            },
            "warmup": {"type": "polynomial", "polynomial": {"warmup_steps": 10, "power": 1}},
        }
    )
    target = 1.0 * (1 - 10 / 100)  # the decay's value at the end of warm-up
    # warm-up: target * (max(step, 1) / 10) ** 1 -- step 0 counts as step 1
    _check(
        lr,
        {
            0: target * 1 / 10,
            1: target * 1 / 10,
            5: target * 5 / 10,
            10: 0.9,
            60: 1 - 60 / 100,
            100: 0.0,
            200: 0.0,
        },
    )
    squared = _lr(
        {
            "learning_rate": {
                "type": "polynomial",
                "polynomial": {
                    "initial_learning_rate": 1.0,
                    "decay_steps": 100,
                    "end_learning_rate": 0.0001,
                    "power": 2.0,
                },
            }
        }
    )
    _check(squared, {50: (1.0 - 0.0001) * (1 - 50 / 100) ** 2 + 0.0001, 100: 0.0001})
    cycle = _lr(
        {
            "learning_rate": {
                "type": "polynomial",
                "polynomial": {
                    "initial_learning_rate": 1.0,
                    "decay_steps": 100,
                    "end_learning_rate": 0.0,
                    "cycle": True,
                },
            }
        }
    )
    # cycle: decay_steps grows to 100 * ceil(150 / 100) = 200
    _check(cycle, {0: 1.0, 150: 1 - 150 / 200})
    # no decay_steps: the decay spans trainer.train_steps - offset
    spanning = _lr(
        {
            "learning_rate": {
                "type": "polynomial",
                "polynomial": {
                    "initial_learning_rate": 1.0,
                    "end_learning_rate": 0.0,
                    "offset": 10,
                },
            }
        },
        train_steps=50,
    )
    _check(spanning, {30: 1 - 20 / 40, 50: 0.0})


def test_exponential_decay_staircase_and_offset_follow_model_garden():
    exponential = _lr(
        {
            "learning_rate": {
                "type": "exponential",
                "exponential": {
                    "initial_learning_rate": 0.064,
                    "decay_steps": 10,
                    "decay_rate": 0.96,
                    "staircase": True,
                },
            }
        }
    )
    _check(exponential, {0: 0.064, 9: 0.064, 25: 0.064 * 0.96**2, 30: 0.064 * 0.96**3})
    smooth = _lr(
        {
            "learning_rate": {
                "type": "exponential",
                "exponential": {
                    "initial_learning_rate": 0.064,
                    "decay_steps": 10,
                    "decay_rate": 0.96,
                    "offset": 5,
                },
            }
        }
    )
    _check(smooth, {30: 0.064 * 0.96**2.5})


def test_power_decay_follows_model_garden():
    power = _lr(
        {"learning_rate": {"type": "power", "power": {"initial_learning_rate": 1.0, "power": -0.5}}}
    )
    _check(power, {0: 1.0, 1: 1.0, 4: 0.5, 100: 0.1})


def test_a_constant_rate_is_a_number_and_warms_up_linearly_from_its_start_value():
    constant = _lr({"learning_rate": {"type": "constant", "constant": {"learning_rate": 0.1}}})
    assert constant == 0.1
    warm = _lr(
        {
            "learning_rate": {"type": "constant", "constant": {"learning_rate": 0.1}},
            "warmup": {
                "type": "linear",
                "linear": {"warmup_steps": 4, "warmup_learning_rate": 0.02},
            },
        }
    )
    _check(warm, {0: 0.02, 1: 0.02 + 1 / 4 * (0.1 - 0.02), 4: 0.1, 99: 0.1})


def test_flat_form_converts_with_a_deprecation_warning_and_keeps_its_behaviour(caplog):
    caplog.set_level(logging.WARNING, "generic_trainer.task")
    flat = {
        "type": "adam",
        "learning_rate": 0.01,
        "learning_rate_schedule": "cosine",
        "warmup_steps": 10,
    }
    cfg = build_experiment(
        ExperimentConfig(trainer=TrainerConfig(train_steps=110)),
        config_text={"trainer": {"optimizer_config": flat}},
    )
    assert (
        "deprecated" in caplog.text
        and ".learning_rate.type" in caplog.text
        and ".optimizer.type" in caplog.text
    )
    opt = cfg.trainer.optimizer_config
    assert (
        opt.optimizer.type == "adam"
        and opt.learning_rate.type == "cosine"
        and opt.warmup.type == "linear"
    )
    from generic_trainer.task.schedules import build_learning_rate

    lr = build_learning_rate(opt, 110)
    # the flat form's schedule: linear 0 -> 0.01 over 10 steps, then a cosine over the remaining 100
    # steps
    _check(lr, {5: 0.005, 10: 0.01, 60: 0.01 * 0.5 * (1 + math.cos(math.pi * 50 / 100)), 110: 0.0})
    # a flat override onto a config keeps what it does not name (here the optimizer type)
    cfg = build_experiment(cfg, params_override="trainer.optimizer_config.optimizer.type=sgd")
    cfg = build_experiment(cfg, params_override="trainer.optimizer_config.momentum=0.5")
    assert cfg.trainer.optimizer_config.optimizer.sgd.momentum == 0.5
    assert cfg.trainer.optimizer_config.learning_rate.type == "cosine"
    # the flat Python object still works
    legacy = TrainerConfig(
        optimizer_config=OptimizerConfig(type="sgd", learning_rate=0.05, momentum=0.9)
    )
    assert isinstance(legacy.optimizer_config, OptimizationConfig)
    assert (
        legacy.optimizer_config.optimizer.type == "sgd"
        and legacy.optimizer_config.optimizer.sgd.momentum == 0.9
    )
    assert legacy.optimizer_config.learning_rate.constant.learning_rate == 0.05
    with pytest.raises(
        UserInputError, match=r"momentum: not an option of adam \(sgd, rmsprop, lars only\)"
    ):
        build_experiment(
            ExperimentConfig(), config_text={"trainer": {"optimizer_config": {"momentum": 0.9}}}
        )
    with pytest.raises(
        UserInputError, match="adam takes no weight decay; use .*adamw.weight_decay_rate"
    ):
        build_experiment(
            ExperimentConfig(), config_text={"trainer": {"optimizer_config": {"weight_decay": 0.1}}}
        )


@pytest.mark.parametrize(
    "values, key, message",
    [
        (
            {"optimizer": {"type": "sgd", "sgd": {"momentm": 0.9}}},
            "trainer.optimizer_config.optimizer.sgd.momentm",
            "did you mean 'trainer.optimizer_config.optimizer.sgd.momentum'",
        ),
        (
            {"learning_rate": {"type": "cosine", "cosin": {}}},
            "trainer.optimizer_config.learning_rate.cosin",
            "did you mean 'trainer.optimizer_config.learning_rate.cosine'",
        ),
        (
            {"warmup": {"linear": {"warmup_step": 3}}},
            "trainer.optimizer_config.warmup.linear.warmup_step",
            "did you mean 'trainer.optimizer_config.warmup.linear.warmup_steps'",
        ),
    ],
)
def test_unknown_keys_name_the_nearest_known_key(values, key, message):
    with pytest.raises(UserInputError) as e:
        build_experiment(ExperimentConfig(), config_text={"trainer": {"optimizer_config": values}})
    assert f"unknown key {key!r}" in str(e.value) and message in str(e.value)


@pytest.mark.parametrize(
    "values, message",
    [
        (
            {"optimizer": {"type": "sgd_torch"}},
            "optimizer.type: unknown type 'sgd_torch'; expected one of sgd, sgd_experimental, adam",
        ),
        ({"optimizer": {"type": "adafactor"}}, "Adafactor is not provided"),
        (
            {"optimizer": {"type": "sgd", "sgd": {"decay": 0.1}}},
            "sgd.decay: Keras 3 optimizers have no `decay`",
        ),
        (
            {"optimizer": {"type": "adam", "adam": {"clipnorm": 1.0, "global_clipnorm": 1.0}}},
            "set at most one of",
        ),
        (
            {
                "learning_rate": {
                    "type": "stepwise",
                    "stepwise": {"boundaries": [5], "values": [1.0]},
                }
            },
            "stepwise.values: expected one more value than boundaries",
        ),
        (
            {
                "learning_rate": {
                    "type": "stepwise",
                    "stepwise": {"boundaries": [5, 5], "values": [1.0, 0.1, 0.01]},
                }
            },
            "expected strictly increasing steps",
        ),
        (
            {"learning_rate": {"type": "cosine", "cosine": {"decay_steps": 10}}},
            "cosine.initial_learning_rate: required",
        ),
        (
            {
                "learning_rate": {
                    "type": "exponential",
                    "exponential": {"initial_learning_rate": 1.0, "decay_rate": 0.5},
                }
            },
            "exponential.decay_steps: required",
        ),
        (
            {"learning_rate": {"type": "step_cosine_with_offset"}},
            "learning_rate.type: unknown type",
        ),
        ({"warmup": {"type": "linear"}}, "warmup.linear.warmup_steps: required"),
        (
            {"warmup": {"type": "polynomial", "polynomial": {"warmup_steps": -1}}},
            "warmup.polynomial.warmup_steps: expected 0 or more, got -1",
        ),
        (
            {
                "learning_rate": {
                    "type": "polynomial",
                    "polynomial": {"initial_learning_rate": 0.1, "decay_steps": 0},
                }
            },
            "polynomial.decay_steps: expected a positive integer, got 0",
        ),
        (
            {"learning_rate": {"type": "stepwise", "stepwise": {"values": [1.0]}}},
            "stepwise.boundaries: required by the chosen type: set boundaries",
        ),
        ({"learning_rate": {"type": "power"}}, "power.initial_learning_rate: required"),
        ({"ema": {"average_decay": 1.5}}, "ema.average_decay: expected 0 <= decay < 1"),
    ],
)
def test_bad_optimizer_configs_name_the_key(values, message):
    from generic_trainer.task.resolve import validate

    cfg = build_experiment(
        ExperimentConfig(trainer=TrainerConfig(train_steps=10)),
        config_text={
            "trainer": {"optimizer_config": values},
            "task": {
                "train_data": {"input_path": "/x/*"},
                "validation_data": {"input_path": "/y/*"},
            },
        },
    )
    with pytest.raises(UserInputError, match=message):
        validate(cfg, "train")


def _build(values: dict, train_steps: int = 100):
    from generic_trainer.task import optimizers

    return optimizers.build(build_optimization_config(values), train_steps)


def test_each_optimizer_type_builds_with_its_block():
    import keras

    sgd = _build(
        {
            "optimizer": {
                "type": "sgd",
                "sgd": {"momentum": 0.9, "nesterov": True, "global_clipnorm": 2.0},
            }
        }
    )
    assert (
        isinstance(sgd, keras.optimizers.SGD)
        and sgd.momentum == 0.9
        and sgd.nesterov
        and sgd.global_clipnorm == 2
    )
    adam = _build(
        {"optimizer": {"type": "adam", "adam": {"beta_2": 0.98, "amsgrad": True, "clipnorm": 1.5}}}
    )
    assert (
        isinstance(adam, keras.optimizers.Adam)
        and adam.beta_2 == 0.98
        and adam.amsgrad
        and adam.clipnorm == 1.5
    )
    adamw = _build({"optimizer": {"type": "adamw", "adamw": {"weight_decay_rate": 0.05}}})
    assert isinstance(adamw, keras.optimizers.AdamW) and adamw.weight_decay == 0.05
    assert (
        adamw.global_clipnorm == 1.0
    )  # Model Garden's adamw clips the global norm to gradient_clip_norm=1.0
    rms = _build({"optimizer": {"type": "rmsprop", "rmsprop": {"rho": 0.8, "centered": True}}})
    assert isinstance(rms, keras.optimizers.RMSprop) and rms.rho == 0.8 and rms.centered
    adagrad = _build(
        {"optimizer": {"type": "adagrad", "adagrad": {"initial_accumulator_value": 0.5}}}
    )
    assert (
        isinstance(adagrad, keras.optimizers.Adagrad) and adagrad.initial_accumulator_value == 0.5
    )
    assert type(_build({"optimizer": {"type": "lamb"}})).__name__ == "LAMB"
    assert type(_build({"optimizer": {"type": "lars"}})).__name__ == "LARS"
    from generic_trainer.task.config import RuntimeConfig
    from generic_trainer.task.optimizers import build

    scaled = build(
        OptimizationConfig(), 10, RuntimeConfig(mixed_precision_dtype="float16", loss_scale=128.0)
    )
    assert (
        isinstance(scaled, keras.optimizers.LossScaleOptimizer)
        and float(scaled.scale_loss(1.0)) == 128.0
    )


def _one_step(
    optimizer, weights: list[float], grads: list[float], name: str = "kernel"
) -> np.ndarray:
    import keras

    variable = keras.Variable(np.array(weights, dtype="float32"), name=name)
    optimizer.build([variable])
    optimizer.apply_gradients(
        [(keras.ops.convert_to_tensor(np.array(grads, dtype="float32")), variable)]
    )
    return np.asarray(variable.numpy())


def test_one_lamb_step_is_the_hand_computed_update_with_its_exclusions():
    opt = _build(
        {
            "optimizer": {"type": "lamb", "lamb": {"weight_decay_rate": 0.01}},
            "learning_rate": {"type": "constant", "constant": {"learning_rate": 0.1}},
        }
    )
    w, g = [3.0, 4.0], [1.0, 0.0]
    # m = 0.1 g, v = 0.001 g^2; bias-corrected m_hat = g, v_hat = g^2; r = g / (|g| + 1e-6) + 0.01 w
    r = [1.0 / (1.0 + 1e-6) + 0.01 * 3.0, 0.0 + 0.01 * 4.0]
    ratio = 5.0 / math.hypot(*r)  # ||w|| / ||r||
    expected = [3.0 - 0.1 * ratio * r[0], 4.0 - 0.1 * ratio * r[1]]
    np.testing.assert_allclose(_one_step(opt, w, g), expected, rtol=1e-5)
    # excluded from weight decay and from layer adaptation: plain Adam-like step lr * g / (|g| +
    # eps)
    plain = _build(
        {
            "optimizer": {
                "type": "lamb",
                "lamb": {"weight_decay_rate": 0.01, "exclude_from_weight_decay": ["bias"]},
            },
            "learning_rate": {"type": "constant", "constant": {"learning_rate": 0.1}},
        }
    )
    np.testing.assert_allclose(
        _one_step(plain, w, g, name="bias"), [3.0 - 0.1 / (1 + 1e-6), 4.0], rtol=1e-5
    )


def test_one_lars_step_is_the_hand_computed_update():
    opt = _build(
        {
            "optimizer": {
                "type": "lars",
                "lars": {"weight_decay_rate": 0.1, "momentum": 0.9, "eeta": 0.001},
            },
            "learning_rate": {"type": "constant", "constant": {"learning_rate": 1.0}},
        }
    )
    # g' = g + 0.1 w = [1.3, 0.4]; trust = eeta ||w|| / ||g'||; v = 0 * 0.9 + lr * trust * g'; w -=
    # v
    g2 = [1.0 + 0.1 * 3.0, 0.0 + 0.1 * 4.0]
    trust = 0.001 * 5.0 / math.hypot(*g2)
    expected = [3.0 - trust * g2[0], 4.0 - trust * g2[1]]
    np.testing.assert_allclose(_one_step(opt, [3.0, 4.0], [1.0, 0.0]), expected, rtol=1e-5)


def test_adamw_weight_decay_regexes_follow_model_garden():
    from generic_trainer.task.layerwise import decays

    class Var:
        def __init__(self, path):
            self.path = path

    kernel, bias, norm = Var("dense/kernel"), Var("dense/bias"), Var("layer_norm/gamma")
    vit = [
        ".*(kernel|weight):0$"
    ]  # the ViT experiments' pattern, written for TF2 names (`dense/kernel:0`)
    assert decays(kernel, vit, None)
    assert decays(bias, vit, None)  # Model Garden: not included is not excluded
    assert not decays(bias, vit, ["bias"]) and decays(
        kernel, vit, [".*"]
    )  # include wins over exclude
    assert not decays(norm, None, ["layer_norm", "bias"])
    # in a real step: zero gradients, so only the decay moves the weights: w -= lr * rate * w
    import keras

    opt = _build(
        {
            "optimizer": {
                "type": "adamw",
                "adamw": {
                    "weight_decay_rate": 0.5,
                    "gradient_clip_norm": 0.0,
                    "exclude_from_weight_decay": ["bias"],
                },
            },
            "learning_rate": {"type": "constant", "constant": {"learning_rate": 0.1}},
        }
    )
    layer = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="ones")
    layer.build((None, 2))
    opt.build(layer.trainable_variables)
    opt.apply_gradients([(keras.ops.zeros_like(v), v) for v in layer.trainable_variables])
    np.testing.assert_allclose(layer.kernel.numpy(), np.full((2, 2), 1 - 0.1 * 0.5), rtol=1e-6)
    np.testing.assert_allclose(layer.bias.numpy(), np.ones(2), rtol=1e-6)


def test_with_base_learning_rate_keeps_the_schedule():
    cfg = build_optimization_config(
        {
            "learning_rate": {
                "type": "stepwise",
                "stepwise": {"boundaries": [10], "values": [0.5, 0.05]},
            }
        }
    )
    assert cfg.with_base_learning_rate(1.0).learning_rate.stepwise.values == pytest.approx(
        [1.0, 0.1]
    )
    cos = build_optimization_config(
        {"learning_rate": {"type": "cosine", "cosine": {"initial_learning_rate": 0.1}}}
    )
    assert cos.with_base_learning_rate(0.3).learning_rate.cosine.initial_learning_rate == 0.3
    assert (
        override(OptimizationConfig(), {"ema": {"average_decay": 0.9}}, "x").ema.average_decay
        == 0.9
    )


def test_ema_decay_follows_model_garden():
    from generic_trainer.task.ema import decay_at
    from generic_trainer.task.optimizer_blocks import EMAConfig

    dynamic = EMAConfig(average_decay=0.99)
    # min(average_decay, (1 + t) / (10 + t)) with t = step - start_step
    assert float(decay_at(dynamic, 1)) == pytest.approx(min(0.99, 2 / 11))
    assert float(decay_at(dynamic, 50)) == pytest.approx(min(0.99, 51 / 60))
    assert float(decay_at(dynamic, 1000)) == pytest.approx(0.99)
    late = EMAConfig(average_decay=0.99, start_step=5)
    assert float(decay_at(late, 3)) == 0.0  # before start_step the average follows the weights
    assert float(decay_at(late, 5)) == pytest.approx(1 / 10)
    assert float(decay_at(EMAConfig(average_decay=0.9, dynamic_decay=False), 1)) == pytest.approx(
        0.9
    )


def test_a_block_set_but_not_chosen_is_logged(caplog):
    caplog.set_level(logging.WARNING, "generic_trainer.task")
    defaults = ExperimentConfig(
        trainer=TrainerConfig(
            optimizer_config=build_optimization_config(
                {"learning_rate": {"type": "constant", "constant": {"learning_rate": 0.01}}}
            )
        )
    )
    # the file switches to stepwise: the defaults' constant block is not worth a warning
    build_experiment(
        defaults,
        config_text={
            "trainer": {
                "optimizer_config": {
                    "learning_rate": {
                        "type": "stepwise",
                        "stepwise": {"boundaries": [5], "values": [0.1, 0.01]},
                    }
                }
            }
        },
    )
    assert "is set but" not in caplog.text
    # a warmup block without warmup.type (Model Garden experiment factories set it in Python) is
    # ignored, and said so
    build_experiment(
        defaults,
        config_text={"trainer": {"optimizer_config": {"warmup": {"linear": {"warmup_steps": 10}}}}},
    )
    assert (
        "trainer.optimizer_config.warmup.linear is set but its one-of's type chooses another block"
        in caplog.text
    )
