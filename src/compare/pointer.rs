//! RFC 6901 JSON pointers as the policy writes them (`/spec/replicas`, `~1` is `/`,
//! `~0` is `~`), split into the tokens the ignore rules and field-manager records use.

/// Splits an RFC 6901 pointer into unescaped tokens (`""` → root, no tokens).
pub fn parse_pointer(p: &str) -> Vec<String> {
    if p.is_empty() {
        return vec![];
    }
    p.trim_start_matches('/').split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect()
}
