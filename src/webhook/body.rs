//! Request body framing: the media type and the `payload` field of form deliveries.
//!
//! Decoding is done by hand on bytes so that the decoded `payload` is exactly the byte
//! sequence the Gitea family signed; a lossy text conversion would change invalid UTF-8
//! and break the HMAC (jenkinsci/github-plugin PR #242, mapbox/ecs-conex #64).

/// The two body encodings every forge can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentType {
    /// `application/json`: the body is the JSON payload.
    Json,
    /// `application/x-www-form-urlencoded`: the JSON is in the `payload` field.
    Form,
}

/// Media type from a `Content-Type` value; parameters such as `; charset=utf-8` are
/// ignored and the comparison is case-insensitive (RFC 9110 §8.3.1). `None` for anything
/// else, including a missing header.
pub(crate) fn content_type(value: Option<&str>) -> Option<ContentType> {
    let essence = value?.split(';').next()?.trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Some(ContentType::Json)
    } else if essence.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
        Some(ContentType::Form)
    } else {
        None
    }
}

/// Decoded bytes of the first field called `name` in an `x-www-form-urlencoded` body
/// (`+` is a space, `%XX` a byte; WHATWG URL "application/x-www-form-urlencoded parsing").
pub(crate) fn form_field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    body.split(|&b| b == b'&').find_map(|pair| {
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (key, value) = (&pair[..eq], &pair[eq + 1..]);
        (percent_decode(key, true) == name.as_bytes()).then(|| percent_decode(value, true))
    })
}

/// Percent-decodes bytes; a `%` not followed by two hex digits is kept literally.
pub(crate) fn percent_decode(input: &[u8], plus_as_space: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while let Some(&byte) = input.get(i) {
        match byte {
            b'+' if plus_as_space => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let high = input.get(i + 1).and_then(|&b| hex_value(b));
                let low = input.get(i + 2).and_then(|&b| hex_value(b));
                if let (Some(high), Some(low)) = (high, low) {
                    out.push(high << 4 | low);
                    i += 3;
                } else {
                    out.push(b'%');
                    i += 1;
                }
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    out
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let cases: &[(Option<&str>, Option<ContentType>)] = &[
            (Some("application/json"), Some(ContentType::Json)),
            (Some("application/json; charset=utf-8"), Some(ContentType::Json)),
            (Some("Application/JSON ;charset=UTF-8"), Some(ContentType::Json)),
            (Some("application/x-www-form-urlencoded"), Some(ContentType::Form)),
            (Some("application/x-www-form-urlencoded; charset=utf-8"), Some(ContentType::Form)),
            (Some("text/plain"), None),
            (Some("application/jsonx"), None),
            (Some("multipart/form-data; boundary=x"), None),
            (Some(""), None),
            (None, None),
        ];
        for (value, want) in cases {
            assert_eq!(content_type(*value), *want, "{value:?}");
        }
    }

    #[test]
    fn form_field_decodes_bytes_exactly() {
        let body = b"a=1&payload=%7B%22k%22%3A%22a+b%C3%AB%22%7D&payload=second";
        assert_eq!(form_field(body, "payload").as_deref(), Some("{\"k\":\"a b\u{eb}\"}".as_bytes()));
        assert_eq!(form_field(body, "a").as_deref(), Some(&b"1"[..]));
        assert_eq!(form_field(body, "missing"), None);
        assert_eq!(form_field(b"payload", "payload"), None);
        assert_eq!(form_field(b"payload=", "payload"), Some(vec![]));
    }

    #[test]
    fn percent_decode_keeps_invalid_escapes_and_raw_bytes() {
        assert_eq!(percent_decode(b"%zz%4", true), b"%zz%4");
        assert_eq!(percent_decode(b"%ff%FE", true), vec![0xff, 0xfe]);
        assert_eq!(percent_decode(b"a+b", false), b"a+b");
        assert_eq!(percent_decode(b"%", true), b"%");
    }
}
