//! The sync-option vocabulary: the `Name=value` pairs of an environment's
//! `syncOptions` and of an object's `plumb.dev/sync-options` annotation, in one table
//! ([`SYNC_OPTIONS`]): each option's name, the values it takes, the field of
//! [`SyncOptions`] it sets, and how an object's value merges over the application's.
//! Validation, parsing and merging all read the table: a new sync option is one row
//! (and its field).

use serde::Serialize;

/// How deletes propagate to dependents (`PrunePropagationPolicy`; Kubernetes
/// `DeleteOptions.propagationPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum Propagation {
    /// Dependents are deleted first; the owner disappears last (the default).
    #[default]
    Foreground,
    /// The owner is deleted at once; the garbage collector removes dependents.
    Background,
    /// Dependents are kept, without owner.
    Orphan,
}

/// Sync options (app-wide from the policy, per object from `plumb.dev/sync-options`).
///
/// Per-object options add to the application's: an object can turn an option on, not
/// off (except `Prune`, whose per-object value wins; `CreateNamespace` is the
/// application's alone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// `Prune=false`: never delete this object.
    pub prune_disabled: bool,
    /// `Prune=confirm`: delete only with an approval (`plumb prune APP --approve`, or the
    /// [`crate::plan::PRUNE_APPROVED_ANNOTATION`]).
    pub prune_confirm: bool,
    /// `PruneLast=true`: prune only after every other object is applied and Healthy.
    pub prune_last: bool,
    /// `CreateNamespace=true`: create the destination namespace when missing.
    pub create_namespace: bool,
    /// `FailOnSharedResource=true`: refuse to sync when an object is tracked by another
    /// application, instead of taking it over.
    pub fail_on_shared: bool,
    /// `Replace=true`: write the object with a full replace (PUT) instead of
    /// server-side apply; fields Git does not declare are removed, whoever owns them.
    pub replace: bool,
    /// `Force=true`: when the server refuses a change to an immutable field, delete the
    /// object and create it again. Only when opted in: the object is briefly absent.
    pub force: bool,
    /// `ApplyOutOfSyncOnly=false`: a sync applies every object, not only those that
    /// differ (plumb's default is `true`).
    pub apply_all: bool,
    /// `Validate=false`: the API server ignores unknown fields instead of rejecting the
    /// object (`fieldValidation=Ignore`; default `Strict`).
    pub validate_disabled: bool,
    /// `PrunePropagationPolicy=foreground|background|orphan`.
    pub propagation: Option<Propagation>,
    /// `Adopt=true`: an object that exists without plumb's tracking-id is taken over
    /// (and remembered as adopted: its prune then needs an approval). Without it, such
    /// an object refuses the sync: "exists and is not managed by plumb".
    pub adopt: bool,
}

/// One sync option of the vocabulary.
pub struct SyncOption {
    /// Its name (`Prune`).
    pub name: &'static str,
    /// The values it takes (compared without case).
    pub values: &'static [&'static str],
    /// What a value (one of `values`) sets.
    set: fn(&mut SyncOptions, &str),
    /// The merged options' field from the application's and the object's.
    merge: fn(&mut SyncOptions, &SyncOptions, &SyncOptions),
}

const BOOL: &[&str] = &["true", "false"];

fn yes(v: &str) -> bool {
    v.eq_ignore_ascii_case("true")
}

fn no(v: &str) -> bool {
    v.eq_ignore_ascii_case("false")
}

/// Every sync option plumb knows (others are rejected when the policy is validated).
pub const SYNC_OPTIONS: &[SyncOption] = &[
    SyncOption {
        name: "Prune",
        values: &["true", "false", "confirm"],
        set: |o, v| (o.prune_disabled, o.prune_confirm) = (no(v), v.eq_ignore_ascii_case("confirm")),
        // the object's value wins
        merge: |out, app, obj| {
            out.prune_disabled = obj.prune_disabled || (app.prune_disabled && !obj.prune_confirm);
            out.prune_confirm = obj.prune_confirm || (app.prune_confirm && !obj.prune_disabled);
        },
    },
    SyncOption {
        name: "PruneLast",
        values: BOOL,
        set: |o, v| o.prune_last = yes(v),
        merge: |out, app, obj| out.prune_last = app.prune_last || obj.prune_last,
    },
    SyncOption {
        name: "CreateNamespace",
        values: BOOL,
        set: |o, v| o.create_namespace = yes(v),
        // the application's alone
        merge: |out, app, _| out.create_namespace = app.create_namespace,
    },
    SyncOption {
        name: "FailOnSharedResource",
        values: BOOL,
        set: |o, v| o.fail_on_shared = yes(v),
        merge: |out, app, obj| out.fail_on_shared = app.fail_on_shared || obj.fail_on_shared,
    },
    SyncOption {
        name: "Replace",
        values: BOOL,
        set: |o, v| o.replace = yes(v),
        merge: |out, app, obj| out.replace = app.replace || obj.replace,
    },
    SyncOption {
        name: "Force",
        values: BOOL,
        set: |o, v| o.force = yes(v),
        merge: |out, app, obj| out.force = app.force || obj.force,
    },
    SyncOption {
        name: "ApplyOutOfSyncOnly",
        values: BOOL,
        set: |o, v| o.apply_all = no(v),
        merge: |out, app, obj| out.apply_all = app.apply_all || obj.apply_all,
    },
    SyncOption {
        name: "Validate",
        values: BOOL,
        set: |o, v| o.validate_disabled = no(v),
        merge: |out, app, obj| out.validate_disabled = app.validate_disabled || obj.validate_disabled,
    },
    SyncOption {
        name: "PrunePropagationPolicy",
        values: &["foreground", "background", "orphan"],
        set: |o, v| {
            o.propagation = Some(match v.to_ascii_lowercase().as_str() {
                "background" => Propagation::Background,
                "orphan" => Propagation::Orphan,
                _ => Propagation::Foreground,
            });
        },
        // the object's value wins
        merge: |out, app, obj| out.propagation = obj.propagation.or(app.propagation),
    },
    SyncOption {
        name: "Adopt",
        values: BOOL,
        set: |o, v| o.adopt = yes(v),
        merge: |out, app, obj| out.adopt = app.adopt || obj.adopt,
    },
];

/// Checks one `Name=value` option: the name and its value (both trimmed).
///
/// # Errors
/// A message naming the option when the shape, the name or the value is wrong
/// (`ServerSideApply=false` is refused: plumb always uses server-side apply).
pub fn check_sync_option(opt: &str) -> Result<(&str, &str), String> {
    known(opt).map(|(o, value)| (o.name, value))
}

/// The option `opt` (`Name=value`) names, and its value.
fn known(opt: &str) -> Result<(&'static SyncOption, &str), String> {
    let (name, value) = opt.split_once('=').ok_or_else(|| format!("sync option `{opt}` must be Name=value"))?;
    let (name, value) = (name.trim(), value.trim());
    if name == "ServerSideApply" {
        return Err("sync option `ServerSideApply` is not offered: plumb always uses server-side apply".into());
    }
    let Some(option) = SYNC_OPTIONS.iter().find(|o| o.name == name) else {
        let names: Vec<&str> = SYNC_OPTIONS.iter().map(|o| o.name).collect();
        return Err(format!("unknown sync option `{name}` (known: {})", names.join(", ")));
    };
    if !option.values.iter().any(|a| a.eq_ignore_ascii_case(value)) {
        return Err(format!("sync option `{name}={value}`: value must be one of {}", option.values.join(", ")));
    }
    Ok((option, value))
}

impl SyncOptions {
    /// Checks one `Name=value` option: the name and its value (see
    /// [`check_sync_option`]).
    ///
    /// # Errors
    /// A message naming the option when the shape, the name or the value is wrong
    /// (`ServerSideApply=false` is refused: plumb always uses server-side apply).
    pub fn parse_one(opt: &str) -> Result<(&str, &str), String> {
        check_sync_option(opt)
    }

    /// Parses a list of options; unknown or malformed entries are ignored here (policy
    /// files are validated at load, see [`SyncOptions::parse_one`]; object annotations
    /// are checked by [`SyncOptions::problems`]).
    pub fn parse<'a>(opts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = Self::default();
        for (option, value) in opts.into_iter().filter_map(|o| known(o).ok()) {
            (option.set)(&mut out, value);
        }
        out
    }

    /// The options of an object's `plumb.dev/sync-options` annotation (comma list).
    pub fn of_object(obj: &serde_json::Value) -> Self {
        Self::parse(annotation_options(obj))
    }

    /// Problems of an object's `plumb.dev/sync-options` annotation, one message each.
    pub fn problems(obj: &serde_json::Value) -> Vec<String> {
        annotation_options(obj).filter_map(|o| Self::parse_one(o).err()).collect()
    }

    /// These options with an object's on top (each option's merge rule, see the type's
    /// doc).
    #[must_use]
    pub fn with_object(&self, obj: &Self) -> Self {
        let mut out = Self::default();
        for option in SYNC_OPTIONS {
            (option.merge)(&mut out, self, obj);
        }
        out
    }
}

fn annotation_options(obj: &serde_json::Value) -> impl Iterator<Item = &str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(crate::tracking::SYNC_OPTIONS_ANNOTATION))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field is set by exactly the option the table says, and merged by its rule.
    #[test]
    fn each_option_sets_its_field_and_merges_by_its_rule() {
        let on = |opt: &str| SyncOptions::parse([opt]);
        assert!(on("Prune=false").prune_disabled && on("Prune=confirm").prune_confirm);
        assert!(on("PruneLast=true").prune_last && on("CreateNamespace=TRUE").create_namespace);
        assert!(on("FailOnSharedResource=true").fail_on_shared && on("Replace=true").replace);
        assert!(on("Force=true").force && on("ApplyOutOfSyncOnly=false").apply_all);
        assert!(on("Validate=false").validate_disabled && on("Adopt=true").adopt);
        assert_eq!(on("PrunePropagationPolicy=orphan").propagation, Some(Propagation::Orphan));
        assert_eq!(on("Bogus=true"), SyncOptions::default(), "unknown options set nothing");
        // an object turns options on, Prune's and the propagation's value win, the
        // namespace is the application's
        let app = SyncOptions::parse(["Prune=false", "CreateNamespace=true", "PrunePropagationPolicy=background"]);
        let obj = SyncOptions::parse([
            "Prune=confirm",
            "Replace=true",
            "CreateNamespace=false",
            "PrunePropagationPolicy=orphan",
        ]);
        let merged = app.with_object(&obj);
        assert!(!merged.prune_disabled && merged.prune_confirm && merged.replace && merged.create_namespace);
        assert_eq!(merged.propagation, Some(Propagation::Orphan));
        assert_eq!(app.with_object(&SyncOptions::default()), app, "no object options: the application's");
    }
}
