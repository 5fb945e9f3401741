//! The sync-option vocabulary (`syncOptions` of an environment, the
//! `plumb.dev/sync-options` annotation of an object): which `Name=value` pairs exist.
//! Checked here, when a policy file is validated; what each one makes a sync do is
//! [`crate::plan::SyncOptions`]'s.

/// Sync option names plumb knows (others are rejected when the policy is validated).
pub const SYNC_OPTION_NAMES: &[&str] = &[
    "Prune",
    "PruneLast",
    "CreateNamespace",
    "FailOnSharedResource",
    "Replace",
    "Force",
    "ApplyOutOfSyncOnly",
    "Validate",
    "PrunePropagationPolicy",
    "Adopt",
];

/// Checks one `Name=value` option: the name and its value (both trimmed).
///
/// # Errors
/// A message naming the option when the shape, the name or the value is wrong
/// (`ServerSideApply=false` is refused: plumb always uses server-side apply).
pub fn check_sync_option(opt: &str) -> Result<(&str, &str), String> {
    let (name, value) = opt.split_once('=').ok_or_else(|| format!("sync option `{opt}` must be Name=value"))?;
    let (name, value) = (name.trim(), value.trim());
    if name == "ServerSideApply" {
        return Err("sync option `ServerSideApply` is not offered: plumb always uses server-side apply".into());
    }
    if !SYNC_OPTION_NAMES.contains(&name) {
        return Err(format!("unknown sync option `{name}` (known: {})", SYNC_OPTION_NAMES.join(", ")));
    }
    let allowed: &[&str] = match name {
        "Prune" => &["true", "false", "confirm"],
        "PrunePropagationPolicy" => &["foreground", "background", "orphan"],
        _ => &["true", "false"],
    };
    if !allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
        return Err(format!("sync option `{name}={value}`: value must be one of {}", allowed.join(", ")));
    }
    Ok((name, value))
}
