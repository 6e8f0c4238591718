//! Answering gh's GraphQL queries the way GitHub does: exactly the fields
//! the query selected, under their aliases, from a larger object graph
//! (`serde_json::Value`s carrying `__typename`).
//!
//! The query text is parsed with `graphql-parser`; the operation is named in
//! the text only (gh sends no `operationName`). Fields whose answer depends
//! on their arguments (`repository(owner:, name:)`, `pullRequest(number:)`,
//! `node(id:)`, `commits(last:)`, `contexts(first:, after:)`,
//! `pullRequests(headRefName:)`, `__type(name:)`) are resolved by a
//! [`Resolver`]; every other field is read from the object. A field the
//! graph does not hold is answered `null` and reported as missing, so a
//! test can assert that gh asked for nothing the scenario left out.

use std::collections::BTreeMap;

use graphql_parser::query::{
    Definition, Document, OperationDefinition, Selection, SelectionSet, TypeCondition, Value as Gv,
};
use serde_json::{Map, Value, json};

/// The arguments of one field, with variables substituted.
pub(crate) type Args = BTreeMap<String, Value>;

/// A GitHub-style GraphQL error (`{"type", "path", "message"}`), which
/// leaves its field `null`.
#[derive(Debug, Clone)]
pub(crate) struct FieldError {
    /// `NOT_FOUND`, `FORBIDDEN`, …
    pub(crate) kind: &'static str,
    /// The message gh prints.
    pub(crate) message: String,
}

/// Resolves the fields whose value depends on their arguments.
pub(crate) trait Resolver {
    /// The value of `field` of `parent` with `args`; `None` when the field
    /// is read from `parent` itself.
    fn resolve(
        &self,
        parent: &Value,
        field: &str,
        args: &Args,
    ) -> Option<Result<Value, FieldError>>;
}

/// A parsed request: its operation's name and the answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The operation name from the query text (`PullRequestByNumber`), if any.
    pub(crate) operation: Option<String>,
    /// `{"data": …}` plus `"errors"` when a field failed.
    pub(crate) body: Value,
    /// Dotted paths of fields that were asked for and absent from the graph.
    pub(crate) missing: Vec<String>,
}

/// Answers `query` with `variables` from `root` through `resolver`. A
/// query that does not parse is answered as GitHub does, with an error and
/// no data.
pub(crate) fn answer(
    query: &str,
    variables: &Map<String, Value>,
    root: &Value,
    resolver: &dyn Resolver,
) -> Answer {
    let doc: Document<'_, String> = match graphql_parser::parse_query(query) {
        Ok(d) => d,
        Err(e) => {
            return Answer {
                operation: None,
                body: json!({"errors": [{"message": format!("Parse error: {e}")}]}),
                missing: Vec::new(),
            };
        }
    };
    let mut fragments = BTreeMap::new();
    let mut operation = None;
    for def in &doc.definitions {
        match def {
            Definition::Fragment(f) => {
                fragments.insert(f.name.clone(), f);
            }
            Definition::Operation(op) if operation.is_none() => operation = Some(op),
            Definition::Operation(_) => {}
        }
    }
    let (name, selection) = match operation {
        Some(OperationDefinition::Query(q)) => (q.name.clone(), &q.selection_set),
        Some(OperationDefinition::Mutation(m)) => (m.name.clone(), &m.selection_set),
        Some(OperationDefinition::SelectionSet(s)) => (None, s),
        Some(OperationDefinition::Subscription(s)) => (s.name.clone(), &s.selection_set),
        None => {
            return Answer {
                operation: None,
                body: json!({"errors": [{"message": "no operation in the document"}]}),
                missing: Vec::new(),
            };
        }
    };
    let mut projector = Projector {
        variables,
        resolver,
        fragments,
        errors: Vec::new(),
        missing: Vec::new(),
    };
    let data = projector.object(root, selection, &mut Vec::new());
    let mut body = json!({ "data": data });
    if !projector.errors.is_empty() {
        body["errors"] = Value::Array(projector.errors);
    }
    Answer {
        operation: name,
        body,
        missing: projector.missing,
    }
}

struct Projector<'q, 'v> {
    variables: &'v Map<String, Value>,
    resolver: &'v dyn Resolver,
    fragments: BTreeMap<String, &'q graphql_parser::query::FragmentDefinition<'q, String>>,
    errors: Vec<Value>,
    missing: Vec<String>,
}

impl<'q> Projector<'q, '_> {
    /// The selected fields of `obj`, in query order, under their aliases.
    fn object(
        &mut self,
        obj: &Value,
        selection: &'q SelectionSet<'q, String>,
        path: &mut Vec<Value>,
    ) -> Value {
        let mut out = Map::new();
        self.select_into(&mut out, obj, selection, path);
        Value::Object(out)
    }

    fn select_into(
        &mut self,
        out: &mut Map<String, Value>,
        obj: &Value,
        selection: &'q SelectionSet<'q, String>,
        path: &mut Vec<Value>,
    ) {
        for item in &selection.items {
            match item {
                Selection::Field(field) => {
                    let key = field.alias.clone().unwrap_or_else(|| field.name.clone());
                    path.push(Value::String(key.clone()));
                    let args = self.args(&field.arguments);
                    let value = self.field(obj, &field.name, &args, path);
                    let value = if field.selection_set.items.is_empty() {
                        value
                    } else {
                        self.shape(&value, &field.selection_set, path)
                    };
                    path.pop();
                    out.insert(key, value);
                }
                Selection::InlineFragment(f) => {
                    let applies = match &f.type_condition {
                        Some(TypeCondition::On(t)) => type_matches(obj, t),
                        None => true,
                    };
                    if applies {
                        self.select_into(out, obj, &f.selection_set, path);
                    }
                }
                Selection::FragmentSpread(s) => {
                    if let Some(def) = self.fragments.get(&s.fragment_name).copied() {
                        let TypeCondition::On(t) = &def.type_condition;
                        if type_matches(obj, t) {
                            self.select_into(out, obj, &def.selection_set, path);
                        }
                    }
                }
            }
        }
    }

    /// Applies a sub-selection to an object, a list of objects, or null.
    fn shape(
        &mut self,
        value: &Value,
        selection: &'q SelectionSet<'q, String>,
        path: &mut Vec<Value>,
    ) -> Value {
        match value {
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        path.push(json!(i));
                        let v = self.shape(item, selection, path);
                        path.pop();
                        v
                    })
                    .collect(),
            ),
            Value::Object(_) => self.object(value, selection, path),
            _ => Value::Null,
        }
    }

    fn field(&mut self, obj: &Value, name: &str, args: &Args, path: &[Value]) -> Value {
        if name == "__typename" {
            return obj.get("__typename").cloned().unwrap_or(Value::Null);
        }
        match self.resolver.resolve(obj, name, args) {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                self.errors.push(json!({
                    "type": e.kind,
                    "path": path,
                    "locations": [{"line": 1, "column": 1}],
                    "message": e.message,
                }));
                Value::Null
            }
            None => match obj.get(name) {
                Some(v) => v.clone(),
                None => {
                    let dotted: Vec<String> = path
                        .iter()
                        .filter_map(|p| p.as_str().map(str::to_owned))
                        .collect();
                    self.missing.push(dotted.join("."));
                    Value::Null
                }
            },
        }
    }

    fn args(&self, arguments: &[(String, Gv<'q, String>)]) -> Args {
        arguments
            .iter()
            .map(|(k, v)| (k.clone(), self.value(v)))
            .collect()
    }

    fn value(&self, v: &Gv<'q, String>) -> Value {
        match v {
            Gv::Variable(name) => self.variables.get(name).cloned().unwrap_or(Value::Null),
            Gv::Int(n) => n.as_i64().map_or(Value::Null, |n| json!(n)),
            Gv::Float(f) => json!(f),
            Gv::String(s) => json!(s),
            Gv::Boolean(b) => json!(b),
            Gv::Null => Value::Null,
            Gv::Enum(e) => json!(e),
            Gv::List(items) => Value::Array(items.iter().map(|i| self.value(i)).collect()),
            Gv::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(v)))
                    .collect(),
            ),
        }
    }
}

/// Whether a fragment on `type_name` applies to `obj`: its `__typename`
/// is that type or one of the interfaces listed in `__implements`, or it
/// carries no type at all.
fn type_matches(obj: &Value, type_name: &str) -> bool {
    match obj.get("__typename").and_then(Value::as_str) {
        None => true,
        Some(t) if t == type_name => true,
        Some(_) => obj
            .get("__implements")
            .and_then(Value::as_array)
            .is_some_and(|list| list.iter().any(|i| i.as_str() == Some(type_name))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoArgs;
    impl Resolver for NoArgs {
        fn resolve(
            &self,
            parent: &Value,
            field: &str,
            args: &Args,
        ) -> Option<Result<Value, FieldError>> {
            match field {
                "thing" => Some(match args.get("n").and_then(Value::as_i64) {
                    Some(1) => Ok(parent["things"][0].clone()),
                    _ => Err(FieldError {
                        kind: "NOT_FOUND",
                        message: "no such thing".into(),
                    }),
                }),
                _ => None,
            }
        }
    }

    #[test]
    fn selects_aliases_fragments_and_reports_missing_fields() {
        let root =
            json!({"things": [{"__typename": "User", "login": "octo", "name": "O", "extra": 1}]});
        let q = "query Q($n: Int!) { a: thing(n: $n) { login ... on User { name } ... on Bot { nope } ...f missing } }
                 fragment f on User { __typename }";
        let vars = json!({"n": 1});
        let a = answer(q, vars.as_object().unwrap(), &root, &NoArgs);
        assert_eq!(a.operation.as_deref(), Some("Q"));
        assert_eq!(
            a.body,
            json!({"data": {"a": {"login": "octo", "name": "O", "__typename": "User", "missing": null}}})
        );
        assert_eq!(a.missing, ["a.missing"]);
        let vars = json!({"n": 2});
        let a = answer(q, vars.as_object().unwrap(), &root, &NoArgs);
        assert_eq!(a.body["data"]["a"], Value::Null);
        assert_eq!(a.body["errors"][0]["type"], "NOT_FOUND");
        assert_eq!(a.body["errors"][0]["path"], json!(["a"]));
    }
}
