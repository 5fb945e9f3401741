//! HMAC-SHA1 for the legacy `X-Hub-Signature: sha1=` header (RustCrypto `hmac` + `sha1`).
//! Only used when a repository sets `allow_sha1`.

use hmac::{Hmac, KeyInit, Mac};

/// HMAC-SHA1 of `body` under `key` (20 bytes).
pub(crate) fn hmac_sha1(key: &[u8], body: &[u8]) -> Vec<u8> {
    match Hmac::<sha1::Sha1>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(body);
            mac.finalize().into_bytes().to_vec()
        }
        // HMAC accepts keys of any length; this arm cannot be reached.
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2202, test cases 1 and 2.
    #[test]
    fn rfc2202() {
        assert_eq!(hex::encode(hmac_sha1(&[0x0b; 20], b"Hi There")), "b617318655057264e28bc0b6fb378c8ef146be00");
        assert_eq!(
            hex::encode(hmac_sha1(b"Jefe", b"what do ya want for nothing?")),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
    }
}
