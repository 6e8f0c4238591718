import json


def describe(value):
    if value == None:
        return "none"
    return f"value: {value}"


def pick(d, key):
    if key in d:
        v = d[key]
    else:
        v = None
    return v


print(describe(dict()), pick({}, "k"), json.dumps(list()))
