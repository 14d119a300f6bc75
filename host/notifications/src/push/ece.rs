//! RFC 8291 message encryption for web push (`Content-Encoding: aes128gcm`, RFC 8188) on `ring`: an ephemeral
//! P-256 key agreed with the subscription's `p256dh`, the subscription's `auth` secret mixed in by HKDF-SHA256,
//! one AES-128-GCM record. The body is the RFC 8188 header (salt, record size, the ephemeral public key as key
//! id) followed by the ciphertext of the payload and its `0x02` last-record delimiter.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use ring::agreement::{agree_ephemeral, EphemeralPrivateKey, UnparsedPublicKey, ECDH_P256};
use ring::hkdf::{KeyType, Salt, HKDF_SHA256};
use ring::rand::{SecureRandom, SystemRandom};

/// The record size written in the header: one record holds the whole payload.
pub const RECORD_SIZE: u32 = 4096;
/// The largest payload one record carries (record size less the delimiter and the tag). Push services accept
/// 4096-byte bodies, so the header's 86 bytes come off too.
pub const MAX_PAYLOAD: usize = 4096 - 86 - 1 - 16;

/// Why a payload cannot be encrypted for a subscription.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncryptError {
    #[error("the subscription's p256dh key is not an uncompressed P-256 point (65 bytes)")]
    BadPublicKey,
    #[error("the subscription's auth secret must be 16 bytes")]
    BadAuthSecret,
    #[error("the payload is {0} bytes; at most {MAX_PAYLOAD} fit one push message")]
    TooLarge(usize),
    #[error("the system's random source or the key agreement failed")]
    Crypto,
}

struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf(salt: &[u8], ikm: &[u8], info: &[&[u8]], len: usize) -> Result<Vec<u8>, EncryptError> {
    let prk = Salt::new(HKDF_SHA256, salt).extract(ikm);
    let okm = prk.expand(info, Len(len)).map_err(|_| EncryptError::Crypto)?;
    let mut out = vec![0; len];
    okm.fill(&mut out).map_err(|_| EncryptError::Crypto)?;
    Ok(out)
}

/// Checks that `p256dh` is a key [`encrypt`] can agree a key with: an uncompressed point (65 bytes, `0x04`
/// first) that lies on P-256. A subscription is checked before it is stored, so a key off the curve is a 400 at
/// subscribe time instead of a 201 for a subscription no message can ever be encrypted for.
pub fn check_public_key(p256dh: &[u8]) -> Result<(), EncryptError> {
    if p256dh.len() != 65 || p256dh[0] != 0x04 {
        return Err(EncryptError::BadPublicKey);
    }
    let ephemeral =
        EphemeralPrivateKey::generate(&ECDH_P256, &SystemRandom::new()).map_err(|_| EncryptError::Crypto)?;
    agree_ephemeral(ephemeral, &UnparsedPublicKey::new(&ECDH_P256, p256dh), |_| ())
        .map_err(|_| EncryptError::BadPublicKey)
}

/// Encrypts `payload` for the subscription with public key `p256dh` (65 bytes) and secret `auth` (16 bytes).
pub fn encrypt(payload: &[u8], p256dh: &[u8], auth: &[u8]) -> Result<Vec<u8>, EncryptError> {
    encrypt_with(payload, p256dh, auth, &SystemRandom::new())
}

fn encrypt_with(payload: &[u8], p256dh: &[u8], auth: &[u8], rng: &dyn SecureRandom) -> Result<Vec<u8>, EncryptError> {
    if p256dh.len() != 65 || p256dh[0] != 0x04 {
        return Err(EncryptError::BadPublicKey);
    }
    if auth.len() != 16 {
        return Err(EncryptError::BadAuthSecret);
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(EncryptError::TooLarge(payload.len()));
    }
    let ephemeral = EphemeralPrivateKey::generate(&ECDH_P256, rng).map_err(|_| EncryptError::Crypto)?;
    let server_public = ephemeral.compute_public_key().map_err(|_| EncryptError::Crypto)?;
    let server_public = server_public.as_ref().to_vec();
    let shared = agree_ephemeral(ephemeral, &UnparsedPublicKey::new(&ECDH_P256, p256dh), |secret| secret.to_vec())
        .map_err(|_| EncryptError::BadPublicKey)?;
    // RFC 8291 section 3.4: the input keying material mixes the auth secret with both public keys.
    let ikm = hkdf(auth, &shared, &[b"WebPush: info\0", p256dh, &server_public], 32)?;
    let mut salt = [0u8; 16];
    rng.fill(&mut salt).map_err(|_| EncryptError::Crypto)?;
    let cek = hkdf(&salt, &ikm, &[b"Content-Encoding: aes128gcm\0"], 16)?;
    let nonce = hkdf(&salt, &ikm, &[b"Content-Encoding: nonce\0"], 12)?;

    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).map_err(|_| EncryptError::Crypto)?);
    let mut record = Vec::with_capacity(payload.len() + 1 + 16);
    record.extend_from_slice(payload);
    record.push(0x02); // The last (and only) record's delimiter, no padding.
    let nonce = Nonce::try_assume_unique_for_key(&nonce).map_err(|_| EncryptError::Crypto)?;
    key.seal_in_place_append_tag(nonce, Aad::empty(), &mut record).map_err(|_| EncryptError::Crypto)?;

    let mut body = Vec::with_capacity(16 + 4 + 1 + 65 + record.len());
    body.extend_from_slice(&salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(65);
    body.extend_from_slice(&server_public);
    body.extend_from_slice(&record);
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::agreement::{agree_ephemeral as agree, EphemeralPrivateKey as Private};

    /// Decrypts as a browser does (the receiving side of RFC 8291), with `ring` too: the independent check is
    /// the Python `http_ece` decryption in the delivery tests.
    fn decrypt(body: &[u8], ua: Private, ua_public: &[u8], auth: &[u8]) -> Vec<u8> {
        let salt = &body[..16];
        assert_eq!(u32::from_be_bytes(body[16..20].try_into().unwrap()), RECORD_SIZE);
        assert_eq!(body[20], 65);
        let server_public = &body[21..86];
        let shared = agree(ua, &UnparsedPublicKey::new(&ECDH_P256, server_public), |s| s.to_vec()).unwrap();
        let ikm = hkdf(auth, &shared, &[b"WebPush: info\0", ua_public, server_public], 32).unwrap();
        let cek = hkdf(salt, &ikm, &[b"Content-Encoding: aes128gcm\0"], 16).unwrap();
        let nonce = hkdf(salt, &ikm, &[b"Content-Encoding: nonce\0"], 12).unwrap();
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).unwrap());
        let mut record = body[86..].to_vec();
        let plain = key
            .open_in_place(Nonce::try_assume_unique_for_key(&nonce).unwrap(), Aad::empty(), &mut record)
            .unwrap()
            .to_vec();
        assert_eq!(plain.last(), Some(&0x02));
        plain[..plain.len() - 1].to_vec()
    }

    #[test]
    fn round_trips_and_refuses_what_cannot_be_sent() {
        let rng = SystemRandom::new();
        let ua = Private::generate(&ECDH_P256, &rng).unwrap();
        let ua_public = ua.compute_public_key().unwrap().as_ref().to_vec();
        let auth = [7u8; 16];
        let body = encrypt(br#"{"title":"hi"}"#, &ua_public, &auth).unwrap();
        assert_eq!(body.len(), 86 + 14 + 1 + 16);
        assert_eq!(decrypt(&body, ua, &ua_public, &auth), br#"{"title":"hi"}"#);
        assert_eq!(encrypt(b"x", &ua_public[..64], &auth), Err(EncryptError::BadPublicKey));
        assert_eq!(encrypt(b"x", &ua_public, &auth[..8]), Err(EncryptError::BadAuthSecret));
        assert_eq!(
            encrypt(&vec![b'x'; MAX_PAYLOAD + 1], &ua_public, &auth),
            Err(EncryptError::TooLarge(MAX_PAYLOAD + 1))
        );
        assert!(encrypt(&vec![b'x'; MAX_PAYLOAD], &ua_public, &auth).unwrap().len() <= 4096);
    }

    #[test]
    fn a_public_key_off_the_curve_is_refused_before_any_message() {
        let rng = SystemRandom::new();
        let ua_public = Private::generate(&ECDH_P256, &rng).unwrap().compute_public_key().unwrap().as_ref().to_vec();
        assert_eq!(check_public_key(&ua_public), Ok(()));
        // One bit of Y flipped (tests/fuzz/regressions/push_subscription_keys/): 65 bytes, 0x04 first, no point.
        let mut off_curve = ua_public.clone();
        off_curve[64] ^= 1;
        assert_eq!(check_public_key(&off_curve), Err(EncryptError::BadPublicKey));
        assert_eq!(encrypt(b"x", &off_curve, &[7u8; 16]), Err(EncryptError::BadPublicKey));
        assert_eq!(check_public_key(&ua_public[..64]), Err(EncryptError::BadPublicKey));
    }
}
