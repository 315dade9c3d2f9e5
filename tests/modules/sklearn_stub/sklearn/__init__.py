"""A stand-in for scikit-learn, the few classes TFX's penguin scikit-learn module uses (tests only).

scikit-learn is not in the image; this lets the wheel's module run unedited: it fits, scores and
pickles plain Python objects into serving_model_dir the way the real classes would be.
"""
