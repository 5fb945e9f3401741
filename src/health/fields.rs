//! Reading the few fields health rules need out of a live object (`serde_json::Value`
//! as the API server returns it), and writing ages the way people read them.

use jiff::{SignedDuration, Timestamp, Unit, fmt::friendly::SpanPrinter};
use serde_json::Value;

/// `metadata.name` (empty when absent).
pub(crate) fn name(obj: &Value) -> &str {
    str_at(obj, "/metadata/name").unwrap_or("")
}

/// API group of `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
pub(crate) fn group(obj: &Value) -> &str {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    crate::tracking::group_of(api_version)
}

/// `kind` (empty when absent).
pub(crate) fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// `Value::pointer` without its per-token allocations (health reads a few dozen fields
/// per object, 1,000 objects per pass): RFC 6901 pointers without `~` escapes are walked
/// directly; others go through `Value::pointer`.
pub(crate) fn at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() || pointer.contains('~') {
        return obj.pointer(pointer);
    }
    let tokens = pointer.strip_prefix('/')?;
    tokens.split('/').try_fold(obj, |v, token| match v {
        Value::Object(m) => m.get(token),
        Value::Array(a) => token.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

pub(crate) fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    at(obj, pointer).and_then(Value::as_str)
}

pub(crate) fn i64_at(obj: &Value, pointer: &str) -> Option<i64> {
    at(obj, pointer).and_then(Value::as_i64)
}

/// An integer status counter; absent counts as 0 (the API server omits zero counters).
pub(crate) fn count(obj: &Value, pointer: &str) -> i64 {
    i64_at(obj, pointer).unwrap_or(0)
}

pub(crate) fn bool_at(obj: &Value, pointer: &str) -> bool {
    at(obj, pointer).and_then(Value::as_bool) == Some(true)
}

/// An RFC 3339 timestamp field (`metadata.creationTimestamp`, `lastTransitionTime`).
pub(crate) fn timestamp(obj: &Value, pointer: &str) -> Option<Timestamp> {
    str_at(obj, pointer)?.parse().ok()
}

/// A label value.
pub(crate) fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    at(obj, "/metadata/labels")?.get(key)?.as_str()
}

/// An annotation value.
pub(crate) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    at(obj, "/metadata/annotations")?.get(key)?.as_str()
}

/// One entry of a `status.conditions` list (the shape of `metav1.Condition`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Condition<'a> {
    pub status: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    raw: &'a Value,
}

impl<'a> Condition<'a> {
    pub(crate) fn of(raw: &'a Value) -> Self {
        let f = |k: &str| raw.get(k).and_then(Value::as_str).unwrap_or("");
        Self { status: f("status"), reason: f("reason"), message: f("message"), raw }
    }

    /// The generation of the spec the condition describes, when it says.
    pub(crate) fn observed_generation(&self) -> Option<i64> {
        self.raw.get("observedGeneration").and_then(Value::as_i64)
    }

    pub(crate) fn type_(&self) -> &'a str {
        self.raw.get("type").and_then(Value::as_str).unwrap_or("")
    }

    pub(crate) fn is_true(&self) -> bool {
        self.status == "True"
    }

    pub(crate) fn is_false(&self) -> bool {
        self.status == "False"
    }

    /// When the condition last changed status.
    pub(crate) fn since(&self) -> Option<Timestamp> {
        timestamp(self.raw, "/lastTransitionTime")
    }

    /// `Type=Status (Reason): message`, leaving out what is empty.
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("{}={}", self.type_(), self.status);
        if !self.reason.is_empty() {
            s.push_str(&format!(" ({})", self.reason));
        }
        if !self.message.is_empty() {
            s.push_str(": ");
            s.push_str(self.message);
        }
        s
    }
}

/// The condition of `type_` in `status.conditions`.
pub(crate) fn condition<'a>(obj: &'a Value, type_: &str) -> Option<Condition<'a>> {
    conditions_in(at(obj, "/status/conditions")?, type_)
}

/// The condition of `type_` in a conditions list.
pub(crate) fn conditions_in<'a>(list: &'a Value, type_: &str) -> Option<Condition<'a>> {
    list.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(type_)).map(Condition::of)
}

/// Time since `since` (zero when `since` is unknown or in the future).
pub(crate) fn elapsed(now: Timestamp, since: Option<Timestamp>) -> SignedDuration {
    since.map_or(SignedDuration::ZERO, |t| now.duration_since(t).max(SignedDuration::ZERO))
}

/// A duration as people read it in a status line: `45s`, `12m`, `3h`, `3h5m`, `50h`
/// (whole seconds below a minute, whole minutes above).
pub fn age(d: SignedDuration) -> String {
    let unit = if d < SignedDuration::from_mins(1) { Unit::Second } else { Unit::Minute };
    let rounded = d.round(jiff::SignedDurationRound::new().smallest(unit).mode(jiff::RoundMode::Trunc)).unwrap_or(d);
    SpanPrinter::new().spacing(jiff::fmt::friendly::Spacing::None).duration_to_string(&rounded)
}

/// `n restart` / `n restarts`.
pub(crate) fn restarts(n: i64) -> String {
    if n == 1 { "1 restart".into() } else { format!("{n} restarts") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_walks_like_value_pointer() {
        let v = serde_json::json!({"a": {"b/c": 1, "d": [10, {"e": "x"}], "": 2}});
        for p in ["", "/a", "/a/d/0", "/a/d/1/e", "/a/d/2", "/a/b~1c", "/a/", "/a/d/x", "/nope/x", "a", "/a/d/1/e/f"] {
            assert_eq!(at(&v, p), v.pointer(p), "{p}");
        }
    }

    #[test]
    fn ages_read_like_a_status_line() {
        for (secs, want) in
            [(0, "0s"), (45, "45s"), (59, "59s"), (60, "1m"), (725, "12m"), (10_800, "3h"), (11_130, "3h5m")]
        {
            assert_eq!(age(SignedDuration::from_secs(secs)), want, "{secs}s");
        }
        assert_eq!(restarts(1), "1 restart");
        assert_eq!(restarts(4), "4 restarts");
    }
}
