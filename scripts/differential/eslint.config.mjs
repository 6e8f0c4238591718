// The ESLint differential's rule set (scripts/differential-eslint-fix.sh):
// core rules of ESLint 9 with autofixes (none deprecated in v9), over the
// CommonJS sources of the chosen packages. Passed with `-c`, so the
// packages' own configurations are not used.
export default [
  { ignores: ["dist/**", "node_modules/**"] },
  {
    files: ["**/*.js", "**/*.cjs", "**/*.mjs"],
    languageOptions: { ecmaVersion: "latest", sourceType: "commonjs" },
    linterOptions: { reportUnusedDisableDirectives: "off" },
    rules: {
      "arrow-body-style": "error",
      curly: "error",
      "dot-notation": "error",
      eqeqeq: ["error", "smart"],
      "no-else-return": "error",
      "no-extra-bind": "error",
      "no-extra-boolean-cast": "error",
      "no-lonely-if": "error",
      "no-unneeded-ternary": "error",
      "no-useless-computed-key": "error",
      "no-useless-rename": "error",
      "no-useless-return": "error",
      "no-var": "error",
      "object-shorthand": "error",
      "operator-assignment": "error",
      "prefer-arrow-callback": "error",
      "prefer-const": "error",
      "prefer-exponentiation-operator": "error",
      "prefer-numeric-literals": "error",
      "prefer-object-has-own": "error",
      "prefer-object-spread": "error",
      "prefer-template": "error",
      yoda: "error",
    },
  },
];
