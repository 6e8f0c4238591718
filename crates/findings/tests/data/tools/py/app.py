import json
import sys
import os


def describe(value):
    if value == None:
        return "none"
    else:
        return "value: {}".format(value)


def pick(d, key):
    if key in d:
        v = d[key]
    else:
        v = None
    return v


print(describe(dict()), pick({}, "k"), json.dumps(list()))
