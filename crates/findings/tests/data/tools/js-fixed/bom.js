const s = "é😀"; const o = {}; o.k = s;
if (s == null) { const t = 1 }
