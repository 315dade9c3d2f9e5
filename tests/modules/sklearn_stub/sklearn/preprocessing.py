"""StandardScaler: per-column mean and standard deviation."""


class StandardScaler:
    def fit(self, x, y=None):
        self.mean_, self.scale_ = x.mean(axis=0), x.std(axis=0) + 1e-12
        return self

    def transform(self, x):
        return (x - self.mean_) / self.scale_
