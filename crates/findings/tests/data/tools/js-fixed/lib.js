'use strict';

const parts = require('./parts');

function join(a, b) {
    const out = `${a  }-${  b}`;
    if (out === undefined) {
        return null;
    } 
        return out;
    
}

module.exports = { join, parts, double (x) { return x * 2; } };
