//! Helm chart version constraints (`source.chart.version`), pure: read by policy
//! validation and by [`crate::source::chart`] to choose a version.
//!
//! Constraints follow Helm's syntax (Masterminds/semver, as `helm pull --version` and
//! Flux's `chart.spec.version` read it), translated to the `semver` crate's
//! [`semver::VersionReq`]: comparators separated by spaces or commas are all required,
//! `||` separates alternatives, `1.2 - 1.4.5` is a hyphen range, and a bare version is
//! exact (`1.2.3` is `=1.2.3`; the crate alone would read it as `^1.2.3`). Where the two
//! differ (and plumb follows the crate): a pre-release version matches only a comparator
//! that names a pre-release of the same `major.minor.patch` (Helm matches any
//! pre-release once the constraint names one), and versions in an index are read
//! leniently (`v1.2`, `1.2` become `1.2.0`).

use semver::{Version, VersionReq};

/// A version constraint: exact, or alternatives of requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// The text as written.
    pub text: String,
    /// Alternatives (`||`); a version matches when one of them does.
    alternatives: Vec<VersionReq>,
}

impl Constraint {
    /// Reads a Helm version constraint (see the module doc).
    ///
    /// # Errors
    /// A message naming the part that is no version or comparator.
    pub fn parse(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("empty: give an exact version (1.2.3) or a range (^1.2, >=1.0.0 <2.0.0)".into());
        }
        let mut alternatives = Vec::new();
        for alt in trimmed.split("||") {
            let req = translate(alt.trim()).map_err(|e| format!("`{text}`: {e}"))?;
            alternatives.push(req);
        }
        Ok(Self { text: trimmed.to_string(), alternatives })
    }

    /// Whether `v` is in range.
    pub fn matches(&self, v: &Version) -> bool {
        self.alternatives.iter().any(|r| r.matches(v))
    }

    /// The highest of `versions` (as written in an index or a tag list) in range, read
    /// leniently ([`lenient`]); `None` when none is.
    pub fn pick<'a>(&self, versions: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        versions
            .into_iter()
            .filter_map(|s| lenient(s).map(|v| (v, s)))
            .filter(|(v, _)| self.matches(v))
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, s)| s)
    }
}

/// One alternative of a constraint as a [`VersionReq`].
fn translate(alt: &str) -> Result<VersionReq, String> {
    if alt.is_empty() {
        return Err("an empty alternative around `||`".into());
    }
    // hyphen range: `1.2 - 1.4.5` (spaces around the hyphen)
    let words: Vec<&str> = alt.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let mut comparators = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if words.get(i + 1) == Some(&"-") {
            let Some(upper) = words.get(i + 2) else { return Err(format!("`{w} -` has no upper bound")) };
            comparators.push(format!(">={}", strip_v(w)));
            comparators.push(format!("<={}", strip_v(upper)));
            i += 3;
            continue;
        }
        // an operator written apart from its version: `>= 1.0`
        let is_op = w.chars().all(|c| "<>=~^!".contains(c));
        let (op, ver) = if is_op {
            let Some(v) = words.get(i + 1) else { return Err(format!("`{w}` has no version")) };
            i += 1;
            (w, *v)
        } else {
            let at = w.find(|c: char| !"<>=~^!".contains(c)).unwrap_or(w.len());
            w.split_at(at)
        };
        if op == "!=" || op == "!" {
            return Err("`!=` is not supported; use ranges".into());
        }
        let ver = strip_v(ver);
        let bare = op.is_empty() && !ver.contains(['*', 'x', 'X']);
        comparators.push(if bare { format!("={ver}") } else { format!("{op}{ver}") });
        i += 1;
    }
    let joined = comparators.join(", ");
    VersionReq::parse(&joined).map_err(|e| format!("{e}"))
}

fn strip_v(s: &str) -> &str {
    s.strip_prefix(['v', 'V']).unwrap_or(s)
}

/// `s` as a version, read as Helm does: a leading `v` dropped, a missing minor or patch
/// taken as 0 (`v1.2` is `1.2.0`); `None` when it is none.
pub fn lenient(s: &str) -> Option<Version> {
    let s = strip_v(s.trim());
    if let Ok(v) = Version::parse(s) {
        return Some(v);
    }
    let (core, rest) = s.find(['-', '+']).map_or((s, ""), |i| s.split_at(i));
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty()
        || parts.len() > 2
        || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let padded = match parts.len() {
        1 => format!("{}.0.0{rest}", parts[0]),
        _ => format!("{}.{}.0{rest}", parts[0], parts[1]),
    };
    Version::parse(&padded).ok()
}
