//! The client-side comparison, for when the API server cannot answer a dry-run (an
//! aggregated API without dry-run support, an admission webhook that refuses dry-runs).
//!
//! Git's object is compared with the live object as a **subset**: only fields Git
//! declares are compared, so fields the server defaulted (`imagePullPolicy`,
//! `protocol: TCP`, `strategy`, …) or other managers set are not drift. Values are
//! compared by meaning where the API defines one: resource quantities by value
//! (`0.5` = `500m`, `1Gi` = `1024Mi`, `1000m` = `1`; Kubernetes "Quantity" type), an
//! int-or-string port by its text, a Secret's `stringData` as the base64 `data` the
//! server stores, and an empty list or map like an absent one. What it cannot see:
//! a field removed from Git that plumb still owns — the server-side comparison is the
//! one that knows (`managedFields`), so it is always tried first.

use base64::Engine;
use serde_json::{Map, Value};

use super::diff::Difference;

/// Map keys whose values are resource quantities (container resources, ResourceQuota,
/// LimitRange, PVC, Pod overhead, Node capacity).
const QUANTITY_PARENTS: &[&str] = &[
    "requests",
    "limits",
    "hard",
    "used",
    "overhead",
    "capacity",
    "allocatable",
    "default",
    "defaultRequest",
    "max",
    "min",
];

/// Differences of the fields `desired` declares, against `live`.
pub fn diff_subset(desired: &Value, live: &Value) -> Vec<Difference> {
    let desired = fold_string_data(desired);
    let mut out = Vec::new();
    walk(&desired, Some(live), String::new(), false, false, &mut out);
    out
}

/// `holds_quantities`: this node's key is one of [`QUANTITY_PARENTS`];
/// `quantity`: this node is a value under such a key.
fn walk(d: &Value, l: Option<&Value>, path: String, holds_quantities: bool, quantity: bool, out: &mut Vec<Difference>) {
    match (d, l) {
        (Value::Object(dm), Some(Value::Object(lm))) => {
            for (k, dv) in dm {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                walk(dv, lm.get(k), p, QUANTITY_PARENTS.contains(&k.as_str()), holds_quantities, out);
            }
        }
        (Value::Array(da), Some(Value::Array(la))) if da.len() == la.len() => {
            for (i, (dv, lv)) in da.iter().zip(la).enumerate() {
                walk(dv, Some(lv), format!("{path}/{i}"), false, false, out);
            }
        }
        (Value::Object(m), None) if m.is_empty() => {}
        (Value::Array(a), None) if a.is_empty() => {}
        (Value::Null, None) => {}
        (dv, lv) => {
            if !equal_leaf(dv, lv, quantity) {
                out.push(Difference { path, desired: Some(dv.clone()), live: lv.cloned(), manager: None });
            }
        }
    }
}

fn equal_leaf(d: &Value, l: Option<&Value>, quantity: bool) -> bool {
    let Some(l) = l else { return false };
    if d == l {
        return true;
    }
    if quantity {
        let q = |v: &Value| match v {
            Value::String(s) => parse_quantity(s),
            Value::Number(n) => parse_quantity(&n.to_string()),
            _ => None,
        };
        if let (Some(a), Some(b)) = (q(d), q(l)) {
            return a == b;
        }
    }
    // int-or-string: 8080 and "8080"
    matches!((d, l), (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) if n.to_string() == *s)
}

/// A Secret's `stringData` as the base64 `data` the API server stores it as.
fn fold_string_data(obj: &Value) -> Value {
    let mut v = obj.clone();
    if v.get("kind").and_then(Value::as_str) != Some("Secret") {
        return v;
    }
    let Some(m) = v.as_object_mut() else { return v };
    if let Some(Value::Object(sd)) = m.remove("stringData") {
        let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if let Some(d) = data.as_object_mut() {
            for (k, val) in sd {
                let text = val.as_str().map_or_else(|| val.to_string(), String::from);
                d.insert(k, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
            }
        }
    }
    v
}

/// A Kubernetes quantity (`500m`, `1.5Gi`, `2e3`, `1000M`) in nano-units, or `None`
/// when the text is not a quantity (API reference: "Quantity", resource package).
pub fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    if num.is_empty() {
        return None;
    }
    let (neg, num) = match num.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty()
        || frac.len() > 9
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut nano: i128 = int.parse::<i128>().unwrap_or(0) * 1_000_000_000;
    if !frac.is_empty() {
        nano += format!("{frac:0<9}").parse::<i128>().ok()?;
    }
    let pow10 = |e: u32| 10i128.checked_pow(e);
    let value = match suffix {
        "" => nano,
        "n" => nano / 1_000_000_000,
        "u" => nano / 1_000_000,
        "m" => nano / 1_000,
        "k" => nano * 1_000,
        "M" => nano * pow10(6)?,
        "G" => nano * pow10(9)?,
        "T" => nano * pow10(12)?,
        "P" => nano * pow10(15)?,
        "E" => nano * pow10(18)?,
        "Ki" => nano * 1024,
        "Mi" => nano * 1024i128.pow(2),
        "Gi" => nano * 1024i128.pow(3),
        "Ti" => nano * 1024i128.pow(4),
        "Pi" => nano * 1024i128.pow(5),
        "Ei" => nano * 1024i128.pow(6),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().ok()?;
            if exp >= 0 { nano.checked_mul(pow10(exp as u32)?)? } else { nano / pow10(exp.unsigned_abs())? }
        }
        _ => return None,
    };
    Some(if neg { -value } else { value })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quantities_by_value() {
        for (a, b) in [
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1000M", "1G"),
            ("2048Mi", "2Gi"),
            ("1.2", "1200m"),
            ("1.5Gi", "1536Mi"),
            ("2e3", "2k"),
        ] {
            assert_eq!(parse_quantity(a), parse_quantity(b), "{a} = {b}");
            assert!(parse_quantity(a).is_some());
        }
        assert_ne!(parse_quantity("1100m"), parse_quantity("1.2"), "negative control");
        for bad in ["", "abc", "1.2.3", "5Xi", "-"] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
    }

    /// argocd-01 / flux-10 on the client-side path: equivalent quantities and server
    /// defaults are not drift; 1100m vs 1.2 and 30 vs 10 are.
    #[test]
    fn subset_comparison() {
        let git = json!({"spec": {"template": {"spec": {
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "ports": [{"containerPort": 8080}], "resources": {"requests": {"cpu": "1.2", "memory": "1.5Gi"}, "limits": {"cpu": "1000m"}}}]}}}});
        let live = json!({"spec": {"replicas": 1, "template": {"spec": {
            "terminationGracePeriodSeconds": 10, "dnsPolicy": "ClusterFirst",
            "containers": [{"name": "c", "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "1100m", "memory": "1536Mi"}, "limits": {"cpu": "1"}}}]}}}});
        let paths: Vec<String> = diff_subset(&git, &live).into_iter().map(|d| d.path).collect();
        assert_eq!(
            paths,
            [
                "/spec/template/spec/containers/0/resources/requests/cpu",
                "/spec/template/spec/terminationGracePeriodSeconds"
            ]
        );
    }

    #[test]
    fn secrets_int_or_string_and_empty() {
        let git =
            json!({"kind": "Secret", "stringData": {"password": "hunter2"}, "metadata": {"labels": {}}, "port": 80});
        let live = json!({"kind": "Secret", "data": {"password": "aHVudGVyMg=="}, "metadata": {}, "port": "80"});
        assert!(diff_subset(&git, &live).is_empty());
        let changed = json!({"kind": "Secret", "data": {"password": "b3RoZXI="}, "metadata": {}, "port": "80"});
        assert_eq!(diff_subset(&git, &changed).into_iter().map(|d| d.path).collect::<Vec<_>>(), ["/data/password"]);
    }
}
