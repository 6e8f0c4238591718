"""Small statistics helpers."""

import math
import os
import sys


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def spread(values):
    if len(values) < 2:
        return 0.0
    else:
        m = mean(values)
        return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def describe(values):
    return "n={}, mean={:.2f}".format(len(values), mean(values))


def summary(values):
    return dict(n=len(values), mean=mean(values), spread=spread(values))
