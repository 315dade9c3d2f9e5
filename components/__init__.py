"""KFP v2 component definitions of generic-trainer (described with the kfp SDK; never imported by
the runtime).

`specs.py` defines the components, `build.py` compiles them into the checked-in
`trainer/`, `tuner/`, `evaluator/` and `infra_validator/component.yaml`.
"""
