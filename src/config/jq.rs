//! `jqPathExpressions` of `ignoreDifferences` (Argo CD's name): a jq expression selects
//! fields, e.g. `.spec.template.spec.containers[] | select(.name == "sidecar") | .image`.
//!
//! Each expression is compiled once (jaq, a jq implementation) as `path(<expr>)`; run on
//! an object it yields the paths of the selected fields, which are then removed like
//! JSON pointers. An expression that does not compile is a policy error; one that fails
//! at run time (e.g. indexing a string) selects nothing for that object and the error
//! is returned to the caller. Bounds: at most [`MAX_PATHS`] paths and [`TIME_LIMIT`] per
//! run (checked between outputs).

use std::time::{Duration, Instant};

use jaq_core::{
    Compiler, Ctx, Vars,
    data::JustLut,
    load::{Arena, File, Loader},
    unwrap_valr,
};
use jaq_json::Val;
use serde_json::Value;

/// Most paths one expression may select in one object.
pub const MAX_PATHS: usize = 10_000;
/// Longest one run may take (checked between outputs).
pub const TIME_LIMIT: Duration = Duration::from_millis(100);

type Filter = jaq_core::compile::Filter<jaq_core::Native<JustLut<Val>>>;

/// A compiled `jqPathExpressions` entry.
#[derive(Clone)]
pub struct JqPath {
    text: String,
    filter: std::sync::Arc<Filter>,
}

impl std::fmt::Debug for JqPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JqPath({})", self.text)
    }
}

impl JqPath {
    /// Compiles `expr`.
    ///
    /// # Errors
    /// The parser's or compiler's message, naming the expression.
    pub fn compile(expr: &str) -> Result<Self, String> {
        let code = format!("path({expr})");
        let defs = jaq_core::defs().chain(jaq_std::defs()).chain(jaq_json::defs());
        let funs = jaq_core::funs().chain(jaq_std::funs()).chain(jaq_json::funs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let modules = loader
            .load(&arena, File { code: code.as_str(), path: () })
            .map_err(|e| format!("jq expression `{expr}` does not parse: {e:?}"))?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|e| format!("jq expression `{expr}` does not compile: {e:?}"))?;
        Ok(Self { text: expr.into(), filter: std::sync::Arc::new(filter) })
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Paths selected in `obj`, as token lists (keys and array indexes as strings).
    ///
    /// # Errors
    /// A run-time error of the expression, or a bound exceeded.
    pub fn paths(&self, obj: &Value) -> Result<Vec<Vec<String>>, String> {
        let input = jaq_json::read::parse_single(obj.to_string().as_bytes()).map_err(|e| format!("{e:?}"))?;
        let ctx = Ctx::<JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        let start = Instant::now();
        let mut out = Vec::new();
        for v in self.filter.id.run((ctx, input)).map(unwrap_valr) {
            let v = v.map_err(|e| format!("jq `{}`: {e}", self.text))?;
            let path: Value = serde_json::from_str(&v.to_string()).map_err(|e| format!("jq `{}`: {e}", self.text))?;
            let tokens = path
                .as_array()
                .map(|a| a.iter().map(|t| t.as_str().map_or_else(|| t.to_string(), String::from)).collect())
                .unwrap_or_default();
            out.push(tokens);
            if out.len() > MAX_PATHS || start.elapsed() > TIME_LIMIT {
                return Err(format!("jq `{}` selects too much (over {MAX_PATHS} paths or {TIME_LIMIT:?})", self.text));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selects_paths() {
        let obj = json!({"webhooks": [{"name": "a", "clientConfig": {"caBundle": "x"}}, {"name": "b", "clientConfig": {}}],
                         "spec": {"containers": [{"name": "app", "image": "a"}, {"name": "sidecar", "image": "s"}]}});
        let p = JqPath::compile(".webhooks[]?.clientConfig.caBundle").expect("compiles");
        assert_eq!(
            p.paths(&obj).expect("runs"),
            [vec!["webhooks", "0", "clientConfig", "caBundle"], vec!["webhooks", "1", "clientConfig", "caBundle"]]
        );
        let p = JqPath::compile(r#".spec.containers[] | select(.name == "sidecar") | .image"#).expect("compiles");
        assert_eq!(p.paths(&obj).expect("runs"), [vec!["spec", "containers", "1", "image"]]);
        assert_eq!(
            JqPath::compile(".nothing.here").expect("compiles").paths(&obj).expect("runs"),
            [vec!["nothing", "here"]]
        );
    }

    #[test]
    fn errors_are_reported() {
        assert!(JqPath::compile(".spec[").is_err());
        assert!(JqPath::compile("nosuchfunction(1)").is_err());
        let p = JqPath::compile(".spec.containers[0].image[0]").expect("compiles");
        assert!(p.paths(&json!({"spec": {"containers": [{"image": "a"}]}})).is_err(), "indexing a string");
    }
}
