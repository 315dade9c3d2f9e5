"""Pipeline: named steps, the last one the estimator."""


class Pipeline:
    def __init__(self, steps):
        self.steps = steps

    def _features(self, x):
        for _, step in self.steps[:-1]:
            x = step.transform(x)
        return x

    def fit(self, x, y):
        for _, step in self.steps[:-1]:
            x = step.fit(x).transform(x)
        self.steps[-1][1].fit(x, y)
        return self

    def predict(self, x):
        return self.steps[-1][1].predict(self._features(x))

    def score(self, x, y):
        return float((self.predict(x) == y).mean())
