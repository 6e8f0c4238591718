var s = "é😀"; var o = {}; o["k"] = s;
if (s == null) { var t = 1 }
