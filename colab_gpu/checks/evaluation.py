"""Checks of evaluation exercises: a classifier's accuracy per class (lesson 04)."""

from __future__ import annotations

import torch

from .core import CheckResult, fail, form_problem, ok, symptom


def class_accuracy(
    class_acc: object, predictions: torch.Tensor, truth: torch.Tensor, classes: int | None = None
) -> CheckResult:
    """Check lesson 04's ``class_acc``: for each class ``c``, the fraction of the test images labelled ``c`` that the
    model predicted as ``c`` (the class's recall), as a tensor of ``classes`` fractions.

    The hint names the mistake by its symptom: a list, percent, counts, each class's precision (the right answers
    among the images *predicted* ``c``), or the overall accuracy repeated. Taught in lesson 04.
    """
    predictions, truth = torch.as_tensor(predictions).cpu().long(), torch.as_tensor(truth).cpu().long()
    classes = int(truth.max()) + 1 if classes is None else classes
    right = (predictions == truth).float()
    expected = torch.zeros(classes).index_add_(0, truth, right) / torch.bincount(truth, minlength=classes).float()
    problem = form_problem(class_acc, expected, "class_acc")
    if problem:
        return fail(problem)
    mine = class_acc.detach().cpu().float()
    if torch.allclose(mine, expected, atol=1e-4):
        hardest = int(expected.argmin())
        return ok(f"class_acc has the right values; the hardest class is {hardest} ({expected[hardest]:.0%} right).")
    predicted = torch.bincount(predictions, minlength=classes).float().clamp(min=1)
    precision = torch.zeros(classes).index_add_(0, predictions, right) / predicted
    if torch.allclose(mine, precision, atol=1e-4):
        return fail(
            "class_acc holds each class's precision: of the images the model *predicted* as c, the fraction that "
            "are c. The exercise asks for the images whose *label* is c (truth == c): the fraction of them predicted c."
        )
    if torch.allclose(mine, right.mean().expand(classes), atol=1e-4):
        return fail(
            f"every entry is the overall accuracy ({right.mean():.1%}): select each class's images (truth == c) "
            "before taking the mean."
        )
    return fail(symptom("class_acc", mine, expected, 1e-4))
