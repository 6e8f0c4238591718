'use strict';

var parts = require('./parts');

function join(a, b) {
    var out = a + '-' + b;
    if (out === undefined) {
        return null;
    } else {
        return out;
    }
}

module.exports = { join: join, parts: parts, double: function (x) { return x * 2; } };
