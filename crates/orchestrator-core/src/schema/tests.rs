use super::*;
use proptest::prelude::*;
use serde_json::json;

/// Validates `value` against `schema` (which must be accepted) and compares
/// the rendered violations with `expect`; `[]` means the value is valid.
#[track_caller]
fn check(schema: Value, value: Value, expect: &[&str]) {
    let validator = match Validator::new(&schema) {
        Ok(v) => v,
        Err(e) => panic!("schema refused: {e}"),
    };
    let got: Vec<String> = match validator.validate(&value) {
        Ok(()) => Vec::new(),
        Err(v) => v.iter().map(ToString::to_string).collect(),
    };
    assert_eq!(got, expect, "value {value}");
}

/// The error `schema` is refused with, rendered.
#[track_caller]
fn refused(schema: Value) -> SchemaError {
    match check_schema(&schema) {
        Ok(()) => panic!("schema accepted: {schema}"),
        Err(e) => e,
    }
}

#[test]
fn reports_every_violation_with_its_path() {
    let schema = json!({
        "type": "object",
        "required": ["id", "status", "findings"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["completed", "failed"]},
            "key_files": {"type": "array", "items": {"type": "string"}},
        }
    });
    check(
        schema,
        json!({"id": 3, "status": "done", "key_files": ["a", 1]}),
        &[
            "$: missing required field `findings`",
            "$.id: expected string, found integer",
            "$.key_files[1]: expected string, found integer",
            "$.status: expected one of \"completed\", \"failed\", found \"done\"",
        ],
    );
}

#[test]
fn accepts_valid_values_and_numeric_widening() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}});
    check(schema, json!({"n": 3}), &[]);
    check(json!({"type": ["string", "null"]}), Value::Null, &[]);
    check(json!({"type": "integer"}), json!(2.0), &[]);
    check(
        json!({"type": "array", "maxItems": 1}),
        json!([1, 2]),
        &["$: expected at most 1 items, found 2"],
    );
}

#[test]
fn closed_objects_reject_unknown_fields() {
    let schema = json!({"type": "object", "additionalProperties": false, "properties": {"a": {}}});
    check(schema, json!({"a": 1, "b": 2}), &["$.b: unexpected field"]);
}

#[test]
fn numbers_compare_by_value_in_enum_and_const() {
    check(json!({"enum": [1, "a"]}), json!(1.0), &[]);
    check(json!({"const": 2.0}), json!(2), &[]);
    check(json!({"const": {"a": [1]}}), json!({"a": [1.0]}), &[]);
    check(json!({"const": 2}), json!(3), &["$: expected 2, found 3"]);
}

#[test]
fn one_of_needs_exactly_one_match() {
    let schema = json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]});
    check(schema.clone(), json!(1), &[]);
    check(schema.clone(), json!(2.5), &[]);
    check(
        schema.clone(),
        json!(3),
        &[
            "$: expected a value matching exactly one `oneOf` schema, it matched oneOf[0] and oneOf[1]",
        ],
    );
    check(
        schema,
        json!(0.5),
        &[
            "$: expected a value matching exactly one `oneOf` schema, none matched \
           (oneOf[0]: $: expected integer, found number; oneOf[1]: $: expected a number >= 2, found 0.5)",
        ],
    );
}

#[test]
fn any_of_needs_one_match() {
    let schema = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
    check(schema.clone(), json!("x"), &[]);
    check(schema.clone(), Value::Null, &[]);
    check(
        schema,
        json!(1),
        &[
            "$: expected a value matching at least one `anyOf` schema, none matched \
           (anyOf[0]: $: expected string, found integer; anyOf[1]: $: expected null, found integer)",
        ],
    );
}

#[test]
fn all_of_reports_each_failing_schema() {
    let schema = json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}, {"type": "object"}]});
    check(schema.clone(), json!({"a": 1, "b": 2}), &[]);
    check(
        schema,
        json!({}),
        &[
            "$: missing required field `a`",
            "$: missing required field `b`",
        ],
    );
}

#[test]
fn not_inverts() {
    let schema = json!({"not": {"type": "string"}});
    check(schema.clone(), json!(1), &[]);
    check(
        schema,
        json!("s"),
        &["$: expected a value not matching the `not` schema"],
    );
}

#[test]
fn pattern_searches_unanchored_with_ascii_classes() {
    check(json!({"pattern": "b+"}), json!("abbc"), &[]);
    check(json!({"pattern": "^[A-Z]{2}-\\d+$"}), json!("AB-12"), &[]);
    check(
        json!({"pattern": "^[A-Z]{2}-\\d+$"}),
        json!("AB-١٢"),
        &["$: expected a string matching the pattern \"^[A-Z]{2}-\\\\d+$\", found \"AB-١٢\""],
    );
    check(
        json!({"pattern": "^\\w+$"}),
        json!("é"),
        &["$: expected a string matching the pattern \"^\\\\w+$\", found \"é\""],
    );
    // Escapes stay escapes: `\\d` is a backslash and a `d`.
    check(json!({"pattern": "^\\\\d$"}), json!("\\d"), &[]);
    // A pattern applies to strings only.
    check(json!({"pattern": "^a$"}), json!(5), &[]);
}

#[test]
fn additional_properties_schema_applies_to_unnamed_fields() {
    let schema = json!({
        "properties": {"id": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"}
    });
    check(
        schema.clone(),
        json!({"id": "a", "x-n": 1, "flag": true}),
        &[],
    );
    check(
        schema,
        json!({"id": "a", "x-n": "1", "flag": 2}),
        &[
            "$.flag: expected boolean, found integer",
            "$.x-n: expected integer, found string",
        ],
    );
}

#[test]
fn pattern_properties_and_closed_objects() {
    let schema = json!({"patternProperties": {"^[a-z]+$": {}}, "additionalProperties": false});
    check(schema.clone(), json!({"abc": 1}), &[]);
    check(
        schema,
        json!({"abc": 1, "A1": 2}),
        &["$.A1: unexpected field"],
    );
}

#[test]
fn property_names_checks_every_key() {
    let schema = json!({"propertyNames": {"pattern": "^[a-z_]+$", "maxLength": 5}});
    check(schema.clone(), json!({"ok": 1, "fine_": 2}), &[]);
    check(
        schema,
        json!({"Bad": 1, "toolong": 2}),
        &[
            "$.Bad: invalid field name: expected a string matching the pattern \"^[a-z_]+$\", found \"Bad\"",
            "$.toolong: invalid field name: expected at most 5 characters, found 7",
        ],
    );
}

#[test]
fn property_counts() {
    let schema = json!({"minProperties": 1, "maxProperties": 2});
    check(schema.clone(), json!({"a": 1}), &[]);
    check(
        schema.clone(),
        json!({}),
        &["$: expected at least 1 properties, found 0"],
    );
    check(
        schema,
        json!({"a": 1, "b": 2, "c": 3}),
        &["$: expected at most 2 properties, found 3"],
    );
}

#[test]
fn unique_items_compares_by_value() {
    let schema = json!({"uniqueItems": true});
    check(schema.clone(), json!([1, "1", [1], {"a": 1}]), &[]);
    check(
        schema,
        json!([1, 2, 1.0, {"a": 1}, {"a": 1}]),
        &[
            "$[2]: expected unique items, found a duplicate of item 0",
            "$[4]: expected unique items, found a duplicate of item 3",
        ],
    );
    check(json!({"uniqueItems": false}), json!([1, 1]), &[]);
}

#[test]
fn exclusive_bounds() {
    let schema = json!({"exclusiveMinimum": 0, "exclusiveMaximum": 1.5});
    check(schema.clone(), json!(1), &[]);
    check(
        schema.clone(),
        json!(0),
        &["$: expected a number > 0, found 0"],
    );
    check(
        schema,
        json!(1.5),
        &["$: expected a number < 1.5, found 1.5"],
    );
    // Large integers compare exactly, not through f64.
    check(
        json!({"maximum": 9_007_199_254_740_992_u64}),
        json!(9_007_199_254_740_993_u64),
        &["$: expected a number <= 9007199254740992, found 9007199254740993"],
    );
}

#[test]
fn multiple_of_is_exact_for_integers_and_tolerant_for_decimals() {
    check(json!({"multipleOf": 3}), json!(9), &[]);
    check(json!({"multipleOf": 0.1}), json!(0.3), &[]);
    check(json!({"multipleOf": 0.5}), json!(2), &[]);
    check(
        json!({"multipleOf": 2}),
        json!(7),
        &["$: expected a multiple of 2, found 7"],
    );
    check(
        json!({"multipleOf": 0.1}),
        json!(0.35),
        &["$: expected a multiple of 0.1, found 0.35"],
    );
}

#[test]
fn prefix_items_then_items_for_the_rest() {
    let schema = json!({
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": {"type": "boolean"}
    });
    check(schema.clone(), json!(["a", 1, true, false]), &[]);
    check(schema.clone(), json!(["a"]), &[]);
    check(
        schema,
        json!([1, "a", null]),
        &[
            "$[0]: expected string, found integer",
            "$[1]: expected integer, found string",
            "$[2]: expected boolean, found null",
        ],
    );
    check(
        json!({"prefixItems": [{}], "items": false}),
        json!([1, 2]),
        &["$[1]: no value is allowed here"],
    );
}

#[test]
fn contains_needs_one_matching_item() {
    let schema = json!({"contains": {"const": "main"}});
    check(schema.clone(), json!(["dev", "main"]), &[]);
    check(
        schema.clone(),
        json!(["dev"]),
        &["$: expected at least one item matching the `contains` schema, none did"],
    );
    check(
        schema,
        json!([]),
        &["$: expected at least one item matching the `contains` schema, none did"],
    );
}

#[test]
fn local_refs_resolve_to_defs_definitions_and_the_root() {
    let schema = json!({
        "$defs": {"id": {"type": "string", "pattern": "^T[0-9]+$"}},
        "definitions": {"n": {"type": "integer"}},
        "type": "object",
        "properties": {
            "id": {"$ref": "#/$defs/id"},
            "n": {"$ref": "#/definitions/n"},
            "child": {"$ref": "#"}
        }
    });
    check(
        schema.clone(),
        json!({"id": "T1", "n": 2, "child": {"id": "T2", "child": {}}}),
        &[],
    );
    check(
        schema,
        json!({"id": "X", "child": {"n": "2", "child": {"id": 5}}}),
        &[
            "$.child.child.id: expected string, found integer",
            "$.child.n: expected integer, found string",
            "$.id: expected a string matching the pattern \"^T[0-9]+$\", found \"X\"",
        ],
    );
}

#[test]
fn refs_decode_pointer_escapes_and_apply_with_siblings() {
    let schema = json!({
        "$defs": {"a/b c": {"minimum": 1}, "t~": {"type": "integer"}},
        "allOf": [{"$ref": "#/$defs/a~1b%20c"}],
        "$ref": "#/$defs/t~0",
        "maximum": 5
    });
    check(schema.clone(), json!(3), &[]);
    check(
        schema.clone(),
        json!(0),
        &["$: expected a number >= 1, found 0"],
    );
    check(
        schema.clone(),
        json!(6),
        &["$: expected a number <= 5, found 6"],
    );
    check(schema, json!(1.5), &["$: expected integer, found number"]);
}

#[test]
fn refs_may_point_at_any_subschema() {
    let schema = json!({
        "properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}
    });
    check(
        schema,
        json!({"b": 1}),
        &["$.b: expected string, found integer"],
    );
}

#[test]
fn format_and_metadata_assert_nothing() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.invalid/answer.json",
        "$comment": "test",
        "title": "Answer",
        "description": "an answer",
        "default": {},
        "examples": [{"email": "a@b.c"}],
        "deprecated": false,
        "readOnly": true,
        "writeOnly": false,
        "properties": {"email": {"type": "string", "format": "email"}}
    });
    check(schema, json!({"email": "not an email"}), &[]);
}

#[test]
fn boolean_schemas() {
    check(json!(true), json!({"anything": 1}), &[]);
    check(json!(false), json!(1), &["$: no value is allowed here"]);
}

#[test]
fn unknown_keywords_are_refused_with_their_path() {
    let schema = json!({
        "type": "object",
        "properties": {"mode": {"if": {"const": "a"}, "then": {"minLength": 1}}}
    });
    let e = refused(schema.clone());
    assert_eq!(
        e,
        SchemaError::UnknownKeyword {
            path: "$.properties.mode.if".into(),
            keyword: "if".into()
        }
    );
    assert_eq!(e.path(), "$.properties.mode.if");
    assert_eq!(
        e.to_string(),
        "schema keyword `if` at $.properties.mode.if is not supported by the validator, \
         which would ignore it; the schema is refused"
    );
    // `validate` fails every value rather than ignore the keyword.
    assert_eq!(
        validate(&schema, &json!({"mode": ""})),
        Err(vec![Violation {
            path: "$".into(),
            message: format!("the schema is refused: {e}"),
        }])
    );
}

#[test]
fn refusals_name_what_is_wrong() {
    let cases = [
        (
            json!({"oneOf": [{"type": "string"}, {"dependentRequired": {}}]}),
            "schema keyword `dependentRequired` at $.oneOf[1].dependentRequired is not supported by the validator, which would ignore it; the schema is refused",
        ),
        (
            json!({"items": {"minContains": 1}}),
            "schema keyword `minContains` at $.items.minContains is not supported by the validator, which would ignore it; the schema is refused",
        ),
        (
            json!({"$ref": "https://example.invalid/s.json"}),
            "`$ref` \"https://example.invalid/s.json\" at $.$ref is not supported: only `#` and JSON-pointer fragments into the same schema (`#/$defs/name`) are resolved",
        ),
        (
            json!({"$ref": "#anchor"}),
            "`$ref` \"#anchor\" at $.$ref is not supported: only `#` and JSON-pointer fragments into the same schema (`#/$defs/name`) are resolved",
        ),
        (
            json!({"properties": {"a": {"$ref": "#/$defs/missing"}}}),
            "`$ref` \"#/$defs/missing\" at $.properties.a.$ref points at no schema in this document",
        ),
        (
            json!({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs"}),
            "`$ref` \"#/$defs\" at $.$ref points at no schema in this document",
        ),
        (
            json!({"properties": {"a": {"pattern": "(?<=a)b"}}}),
            "regular expression \"(?<=a)b\" at $.properties.a.pattern is not supported: look-around, including look-ahead and look-behind, is not supported",
        ),
        (
            json!({"patternProperties": {"([": {}}}),
            "regular expression \"([\" at $.patternProperties is not supported: unclosed character class",
        ),
        (
            json!({"minLength": "3"}),
            "schema keyword `minLength` at $.minLength must be a non-negative integer",
        ),
        (
            json!({"type": "strnig"}),
            "schema keyword `type` at $.type must be a type name (array, boolean, integer, null, number, object, string) or a non-empty list of them",
        ),
        (
            json!({"items": [{"type": "string"}]}),
            "schema keyword `items` at $.items must be a schema (tuples are written with `prefixItems`, as in JSON Schema 2020-12)",
        ),
        (
            json!({"exclusiveMinimum": true, "minimum": 0}),
            "schema keyword `exclusiveMinimum` at $.exclusiveMinimum must be a number",
        ),
        (
            json!({"multipleOf": 0}),
            "schema keyword `multipleOf` at $.multipleOf must be a number greater than 0",
        ),
        (
            json!({"anyOf": []}),
            "schema keyword `anyOf` at $.anyOf must be a non-empty array of schemas",
        ),
        (
            json!({"properties": {"a": {"$id": "inner"}}}),
            "schema keyword `$id` at $.properties.a.$id must be at the root only (embedded schema resources are not supported)",
        ),
        (
            json!({"properties": {"a": 3}}),
            "expected a schema (an object or a boolean) at $.properties.a, found integer",
        ),
        (
            json!({"$ref": "#"}),
            "`$ref` \"#\" at $.$ref leads back to itself without descending into the value, so validation would never end",
        ),
        (
            json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
            "`$ref` \"#/$defs/b\" at $.$defs.a.allOf[0].$ref leads back to itself without descending into the value, so validation would never end",
        ),
    ];
    for (schema, expect) in cases {
        assert_eq!(refused(schema.clone()).to_string(), expect, "{schema}");
    }
}

#[test]
fn recursion_through_the_value_is_not_a_cycle() {
    let schema = json!({
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}]
    });
    check(schema.clone(), json!([["a"], "b", [[[]]]]), &[]);
    assert!(validate(&schema, &json!([["a", 1]])).is_err());
}

/// Both `anyOf` branches recurse into the same items: without memoizing,
/// each level doubles the work and a 64-deep answer would take 2^64 checks.
#[test]
fn recursive_branches_over_the_same_value_take_polynomial_time() {
    let schema = json!({
        "anyOf": [
            {"type": "array", "minItems": 2, "items": {"$ref": "#"}},
            {"type": "array", "items": {"$ref": "#"}},
            {"type": "string"}
        ]
    });
    let mut deep = json!("leaf");
    for _ in 0..64 {
        deep = json!([deep]);
    }
    check(schema.clone(), deep.clone(), &[]);
    let mut bad = json!(1);
    for _ in 0..64 {
        bad = json!([bad]);
    }
    let violations = validate(&schema, &bad).unwrap_err();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0]
            .message
            .starts_with("expected a value matching at least one `anyOf` schema")
    );
}

/// Schemas built only from supported keywords, without `$ref`.
fn schema_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!(true)),
        Just(json!(false)),
        prop::sample::select(TYPE_NAMES).prop_map(|t| json!({"type": t})),
        (-3i64..3).prop_map(|n| json!({"minimum": n})),
        (-3i64..3).prop_map(|n| json!({"exclusiveMaximum": n})),
        (1i64..4).prop_map(|n| json!({"multipleOf": n})),
        (0u64..3).prop_map(|n| json!({"maxLength": n})),
        (0u64..3).prop_map(|n| json!({"minItems": n})),
        (0u64..3).prop_map(|n| json!({"maxProperties": n})),
        prop::sample::select(vec!["^a", "b$", "\\d", "^$", "[a-c]+"])
            .prop_map(|p| json!({"pattern": p})),
        value_strategy().prop_map(|v| json!({"const": v})),
        prop::collection::vec(value_strategy(), 1..3).prop_map(|v| json!({"enum": v})),
        Just(json!({"uniqueItems": true})),
        Just(json!({"required": ["a"]})),
        Just(json!({"format": "email", "title": "t"})),
    ];
    leaf.prop_recursive(3, 24, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(|s| json!({"anyOf": s})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|s| json!({"oneOf": s})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|s| json!({"allOf": s})),
            inner.clone().prop_map(|s| json!({"not": s})),
            inner.clone().prop_map(|s| json!({"items": s})),
            inner.clone().prop_map(|s| json!({"contains": s})),
            inner
                .clone()
                .prop_map(|s| json!({"additionalProperties": s})),
            inner.clone().prop_map(|s| json!({"propertyNames": s})),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| json!({"properties": {"a": a}, "patternProperties": {"^b": b}})),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"prefixItems": [a], "items": b})),
        ]
    })
}

/// Small JSON values that exercise the keywords above.
fn value_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-4i64..4).prop_map(|n| json!(n)),
        (-4i64..4).prop_map(|n| json!(n as f64 + 0.5)),
        "[a-c0-9]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[ab]{1,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn generated_schemas_are_accepted(schema in schema_strategy()) {
        prop_assert_eq!(check_schema(&schema), Ok(()));
    }

    /// `allOf: [s]` and a `$ref` to `s` report exactly what `s` reports;
    /// `anyOf: [s]`, `oneOf: [s]` and `not: {not: s}` accept exactly what `s`
    /// accepts.
    #[test]
    fn single_schema_applicators_agree_with_the_schema(
        s in schema_strategy(),
        value in value_strategy(),
    ) {
        let direct = validate(&s, &value);
        prop_assert_eq!(&validate(&json!({"allOf": [s]}), &value), &direct);
        prop_assert_eq!(
            &validate(&json!({"$defs": {"s": s}, "$ref": "#/$defs/s"}), &value),
            &direct
        );
        for wrapped in [json!({"anyOf": [s]}), json!({"oneOf": [s]}), json!({"not": {"not": s}})] {
            prop_assert_eq!(validate(&wrapped, &value).is_ok(), direct.is_ok(), "{}", wrapped);
        }
    }

    /// `not` accepts exactly what its schema rejects.
    #[test]
    fn not_is_the_complement(s in schema_strategy(), value in value_strategy()) {
        prop_assert_ne!(
            validate(&json!({"not": s}), &value).is_ok(),
            validate(&s, &value).is_ok()
        );
    }
}
