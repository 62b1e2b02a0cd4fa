//! Password authentication: MD5 and SCRAM-SHA-256 (RFC 5802 / RFC 7677, without channel
//! binding). Pure functions and a small state machine; the connection does the I/O.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use md5::{Digest as _, Md5};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

pub const SCRAM_SHA_256: &str = "SCRAM-SHA-256";

/// The answer to an MD5 challenge: `"md5" + hex(md5(hex(md5(password + user)) + salt))`.
pub fn md5_password(user: &str, password: &str, salt: [u8; 4]) -> String {
    let inner = hex(&Md5::new()
        .chain_update(password)
        .chain_update(user)
        .finalize());
    let outer = Md5::new()
        .chain_update(inner.as_bytes())
        .chain_update(salt)
        .finalize();
    format!("md5{}", hex(&outer))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| {
            [
                DIGITS[(b >> 4) as usize] as char,
                DIGITS[(b & 15) as usize] as char,
            ]
        })
        .collect()
}

/// Picks SCRAM-SHA-256 from the server's NUL-separated mechanism list, or names what was
/// offered instead (e.g. only SCRAM-SHA-256-PLUS, which needs TLS channel binding).
pub fn choose_sasl_mechanism(list: &[u8]) -> Result<&'static str, String> {
    let offered: Vec<&str> = list
        .split(|&b| b == 0)
        .filter(|m| !m.is_empty())
        .map(|m| std::str::from_utf8(m).unwrap_or("?"))
        .collect();
    if offered.contains(&SCRAM_SHA_256) {
        Ok(SCRAM_SHA_256)
    } else {
        Err(format!(
            "unsupported SASL mechanism(s) offered by the server: {}",
            offered.join(", ")
        ))
    }
}

/// Names an authentication request code this client does not implement.
pub fn unsupported_method(code: u32) -> String {
    let name = match code {
        2 => "Kerberos V5",
        6 => "SCM credentials",
        7 | 8 => "GSSAPI",
        9 => "SSPI",
        _ => "unknown",
    };
    format!("unsupported authentication method: {name} (request code {code})")
}

/// One SCRAM-SHA-256 exchange, client side.
pub struct Scram {
    password: Vec<u8>,
    client_first_bare: String,
    client_nonce: String,
    /// Set after the server's first message: what the final server signature must equal.
    expected_server_signature: Option<[u8; 32]>,
}

impl Scram {
    /// `user` is sent as-is in the client-first message; PostgreSQL ignores it (it uses the
    /// start-up user), so the connection passes "". The password is used as UTF-8 bytes
    /// without SASLprep, which is the identity for ASCII passwords.
    pub fn new(user: &str, password: &str, client_nonce: String) -> Scram {
        Scram {
            password: password.as_bytes().to_vec(),
            client_first_bare: format!("n={user},r={client_nonce}"),
            client_nonce,
            expected_server_signature: None,
        }
    }

    /// A new exchange with 18 random bytes of nonce from the kernel.
    pub fn with_random_nonce(password: &str) -> Result<Scram, String> {
        let mut raw = [0u8; 18];
        // SAFETY: raw is a valid writable buffer of the given length.
        let n = unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), 0) };
        if n != raw.len() as isize {
            return Err("getrandom failed for the SCRAM nonce".to_string());
        }
        Ok(Scram::new("", password, BASE64.encode(raw)))
    }

    /// `n,,` = no channel binding supported, no authzid.
    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// Takes the server-first message and returns the client-final message.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<String, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "SCRAM server-first message is not UTF-8".to_string())?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err("SCRAM server-first message lacks r, s or i".to_string());
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("SCRAM server nonce does not extend the client nonce".to_string());
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|_| "SCRAM salt is not base64".to_string())?;
        let iterations: u32 = iterations
            .parse()
            .ok()
            .filter(|&i| (1..=10_000_000).contains(&i))
            .ok_or_else(|| "SCRAM iteration count is invalid".to_string())?;

        let salted = hi(&self.password, &salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let client_final_without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, server_first, client_final_without_proof
        );
        let client_signature = hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(hmac(&server_key, auth_message.as_bytes()));
        Ok(format!(
            "{client_final_without_proof},p={}",
            BASE64.encode(proof)
        ))
    }

    /// Checks the server-final message: the server must prove it knows the password too.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let expected = self
            .expected_server_signature
            .ok_or_else(|| "SCRAM server-final message before server-first".to_string())?;
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "SCRAM server-final message is not UTF-8".to_string())?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(format!("SCRAM authentication failed: {error}"));
        }
        let signature = text
            .split(',')
            .find_map(|attr| attr.strip_prefix("v="))
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or_else(|| "SCRAM server-final message lacks a signature".to_string())?;
        if signature == expected {
            Ok(())
        } else {
            Err("SCRAM server signature does not match: not the real server".to_string())
        }
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA-256 with a single output block, which is SCRAM's Hi().
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let key = HmacSha256::new_from_slice(password).expect("HMAC takes keys of any length");
    let mut mac = key.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = mac.finalize().into_bytes().into();
    let mut result = u;
    for _ in 1..iterations {
        let mut mac = key.clone();
        mac.update(&u);
        u = mac.finalize().into_bytes().into();
        for (r, x) in result.iter_mut().zip(u) {
            *r ^= x;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3: user "user", password "pencil".
    #[test]
    fn scram_sha_256_rfc7677_example() {
        let mut scram = Scram::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO".to_string());
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = scram.client_final(server_first.as_bytes()).unwrap();
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(scram
            .verify_server_final(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_err());
        assert!(scram.verify_server_final(b"e=invalid-proof").is_err());
    }

    #[test]
    fn scram_rejects_a_nonce_that_does_not_extend_ours() {
        let mut scram = Scram::new("", "pencil", "abc".to_string());
        assert!(scram.client_final(b"r=xyz123,s=AAAA,i=4096").is_err());
        assert!(scram.client_final(b"r=abc,s=AAAA,i=4096").is_err());
        assert!(scram.client_final(b"r=abcdef,s=AAAA,i=0").is_err());
    }

    /// PostgreSQL stores "md5" + md5("password" + "postgres") for role postgres with password
    /// "password" (a widely published value); the wire answer for salt 01020304 was computed
    /// independently (Python's hashlib).
    #[test]
    fn md5_known_values() {
        assert_eq!(
            hex(&Md5::digest(b"passwordpostgres")),
            "32e12f215ba27cb750c9e093ce4b5127"
        );
        assert_eq!(
            md5_password("postgres", "password", [1, 2, 3, 4]),
            "md598511ceaec347a656f032c7f2a16ef17"
        );
    }

    #[test]
    fn mechanism_choice() {
        assert_eq!(
            choose_sasl_mechanism(b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0"),
            Ok(SCRAM_SHA_256)
        );
        let err = choose_sasl_mechanism(b"SCRAM-SHA-256-PLUS\0\0").unwrap_err();
        assert!(err.contains("SCRAM-SHA-256-PLUS"), "{err}");
    }
}
