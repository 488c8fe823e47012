"""Probing classifiers on frozen encoder layers (Conneau et al., 2018, as the SSAN paper uses it).

Protocol:

- Features: the frozen encoder (eval mode) reads each sentence; each layer's output is
  mean-pooled over the sentence's pieces (``</s>`` and pads excluded). The embedding layer's
  output (scaled embeddings plus positions, fairseq's ``encoder_states[0]``) is layer 0, encoder
  layer k is layer k + 1.
- Classifier, per layer: features standardised on ``tr``; scikit-learn's
  ``LogisticRegression`` (``logreg``, C in :data:`LOGREG_GRID`, at most 500 L-BFGS iterations)
  or a one-hidden-layer ``MLPClassifier`` (``mlp``, hidden sizes x L2 weights in
  :data:`MLP_GRID`, Adam, 200 epochs at most with its default early-stopping off); every
  candidate is trained on ``tr`` with ``random_state = seed``; the one with the best ``va``
  accuracy is kept (ties: the first in grid order) and scored once on ``te``.
- Reported per layer: test accuracy and its 95% confidence interval, the **Wilson score
  interval** for a binomial proportion (:func:`wilson_interval`); with the task, the number of
  test examples and the majority-class baseline of the test part (the share of its most
  frequent label).
"""

import math
from typing import Dict, List, Sequence, Tuple

import numpy as np

LOGREG_GRID = [{"C": c} for c in (0.01, 0.1, 1.0, 10.0)]
MLP_GRID = [{"hidden_layer_sizes": (h,), "alpha": a} for h in (50, 200) for a in (1e-4, 1e-2)]
CLASSIFIERS = ("logreg", "mlp")


def wilson_interval(correct: int, n: int, z: float = 1.959963984540054) -> Tuple[float, float]:
    """The Wilson score interval of the proportion correct / n (95% for the default z)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    # the interval always contains p (rounding could put a bound a hair inside it at p = 0 or 1)
    return (min(lo, p), max(hi, p))


def majority_baseline(labels: Sequence[str]) -> float:
    """The share of the most frequent label."""
    if not labels:
        return float("nan")
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    return float(counts.max() / len(labels))


def pooled_layer_features(maps_states: Sequence) -> np.ndarray:
    """(L + 1, N, C): per sentence, the mean over its pieces (the last one, ``</s>``, excluded)
    of each layer's output; ``maps_states``: one (L + 1, n, C) tensor per sentence."""
    rows = []
    for states in maps_states:
        body = states[:, :-1] if states.size(1) > 1 else states
        rows.append(body.float().mean(1).numpy())
    return np.stack(rows, axis=1)


def _build(classifier: str, params: dict, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    if classifier == "logreg":
        return LogisticRegression(max_iter=500, random_state=seed, **params)
    if classifier == "mlp":
        return MLPClassifier(max_iter=200, random_state=seed, **params)
    raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {classifier!r}")


def train_probe(x: Dict[str, np.ndarray], y: Dict[str, Sequence[str]], classifier: str = "logreg",
                seed: int = 1) -> dict:
    """One layer: ``x[split]`` (N_split, C) features and ``y[split]`` labels for tr, va, te.
    Returns {accuracy, correct, ci95, va_accuracy, params}."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x["tr"])
    xs = {k: scaler.transform(v) for k, v in x.items()}
    grid = LOGREG_GRID if classifier == "logreg" else MLP_GRID
    best = None
    for params in grid:
        model = _build(classifier, params, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(xs["tr"], np.asarray(y["tr"]))
        va = float((model.predict(xs["va"]) == np.asarray(y["va"])).mean())
        if best is None or va > best[0]:
            best = (va, params, model)
    va, params, model = best
    correct = int((model.predict(xs["te"]) == np.asarray(y["te"])).sum())
    n = len(y["te"])
    return {"accuracy": correct / n, "correct": correct, "ci95": list(wilson_interval(correct, n)),
            "va_accuracy": va, "params": {k: list(v) if isinstance(v, tuple) else v
                                          for k, v in params.items()}}


def run_probe(features: np.ndarray, splits: Sequence[str], labels: Sequence[str], task: str,
              classifier: str = "logreg", seed: int = 1) -> dict:
    """All layers: ``features`` (L + 1, N, C), one split (tr/va/te) and label per example.
    Returns the JSON of ssan-probe: task, n_test, majority, classifier, seed, layers[]."""
    splits = np.asarray(splits)
    labels = np.asarray(labels)
    parts = {s: splits == s for s in ("tr", "va", "te")}
    for s, mask in parts.items():
        if not mask.any():
            raise ValueError(f"no example in split {s!r}")
    if len(set(labels[parts["tr"]])) < 2:
        raise ValueError("the training part has a single label: nothing to learn")
    y = {s: labels[m].tolist() for s, m in parts.items()}
    layers: List[dict] = []
    for layer in range(features.shape[0]):
        x = {s: features[layer][m] for s, m in parts.items()}
        layers.append({"layer": layer, **train_probe(x, y, classifier, seed)})
    return {"task": task, "n_test": int(parts["te"].sum()), "majority": majority_baseline(y["te"]),
            "classifier": classifier, "seed": seed, "layers": layers}
