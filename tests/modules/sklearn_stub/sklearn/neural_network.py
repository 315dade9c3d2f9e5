"""MLPClassifier: here a nearest-class-mean classifier with MLPClassifier's constructor."""

import numpy as np


class MLPClassifier:
    def __init__(self, **params):
        self.params = params

    def fit(self, x, y):
        self.classes_ = np.unique(y)
        self.means_ = np.stack([x[y == c].mean(axis=0) for c in self.classes_])
        return self

    def predict(self, x):
        distances = ((x[:, None, :] - self.means_[None]) ** 2).sum(axis=-1)
        return self.classes_[distances.argmin(axis=1)]
