//! `Accept-Encoding` (RFC 9110, 12.5.3): which of the content codings the server can send
//! (`br`, `gzip`) a request accepts, and in which order to try them. Read without
//! allocating, from whatever bytes the request carries; any input gives an answer.
//!
//! A list element is `coding *( OWS ";" OWS parameter )`, the coding a token, `*` or
//! `identity`, ASCII case ignored; its weight is the parameter `q`, a qvalue (`0` to `1`,
//! at most three decimals), 1 without one, and `q=0` refuses it. A coding not named takes
//! `*`'s weight if `*` is named, else is not acceptable; `identity` is acceptable unless
//! refused, by name or by `*;q=0` without it, and weighs against the codings only when
//! named (by itself or `*`): a client that names codings and not identity prefers any of
//! them to none (`br;q=1, gzip;q=0.8` takes gzip where there is no br). An element that does not read as the
//! grammar says (a bad qvalue, a bad token) is skipped, as are codings the server does not
//! send; the first element naming a coding is the one that counts. `x-gzip` is `gzip`
//! (RFC 9110, 8.4.1.3).

/// A content coding the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Br,
    Gzip,
}

impl Coding {
    /// The `Content-Encoding` value.
    pub fn token(self) -> &'static [u8] {
        match self {
            Coding::Br => b"br",
            Coding::Gzip => b"gzip",
        }
    }
}

/// The weights a request gives each coding the server knows, in thousandths (a qvalue has
/// at most three decimals): 0 is not acceptable; identity's is 0 too when not named, as it
/// then outweighs no coding (and is served all the same when no coding is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceptEncoding {
    br: u16,
    gzip: u16,
    identity: u16,
}

/// A weight as given: by name, by `*`, or not given.
#[derive(Clone, Copy, Default)]
struct Weights {
    br: Option<u16>,
    gzip: Option<u16>,
    identity: Option<u16>,
    any: Option<u16>,
}

impl AcceptEncoding {
    /// The codings a request with this `Accept-Encoding` value accepts; without the header
    /// only identity (RFC 9110 would allow any coding, but a client that does not ask gets
    /// the file as it is: what HttpArena checks, and what every server does).
    pub fn parse(value: Option<&[u8]>) -> AcceptEncoding {
        let Some(value) = value else {
            return AcceptEncoding {
                br: 0,
                gzip: 0,
                identity: 0,
            };
        };
        let mut given = Weights::default();
        for element in value.split(|&byte| byte == b',') {
            let Some((coding, weight)) = element_weight(element) else {
                continue;
            };
            let place = match coding {
                c if c.eq_ignore_ascii_case(b"br") => &mut given.br,
                c if c.eq_ignore_ascii_case(b"gzip") || c.eq_ignore_ascii_case(b"x-gzip") => {
                    &mut given.gzip
                }
                c if c.eq_ignore_ascii_case(b"identity") => &mut given.identity,
                b"*" => &mut given.any,
                _ => continue,
            };
            place.get_or_insert(weight);
        }
        AcceptEncoding {
            br: given.br.or(given.any).unwrap_or(0),
            gzip: given.gzip.or(given.any).unwrap_or(0),
            identity: given.identity.or(given.any).unwrap_or(0),
        }
    }

    /// The codings to try, best first, before the file as it is: each acceptable and
    /// weighed at least as high as identity (a coding is smaller, so it wins a tie), the
    /// heavier first, `br` first of two equal.
    pub fn preferred(self) -> impl Iterator<Item = Coding> {
        let ranked = match self.gzip > self.br {
            true => [(Coding::Gzip, self.gzip), (Coding::Br, self.br)],
            false => [(Coding::Br, self.br), (Coding::Gzip, self.gzip)],
        };
        ranked
            .into_iter()
            .filter(move |&(_, weight)| weight > 0 && weight >= self.identity)
            .map(|(coding, _)| coding)
    }
}

/// One list element's coding and weight, or `None` for an empty element or one that does
/// not read as `coding *( OWS ";" OWS parameter )` with a valid `q`.
fn element_weight(element: &[u8]) -> Option<(&[u8], u16)> {
    let mut parts = element.split(|&byte| byte == b';');
    let coding = parts.next()?.trim_ascii();
    if !is_token(coding) {
        return None;
    }
    let mut weight = 1000;
    for parameter in parts {
        let (name, value) = split_once(parameter, b'=')?;
        let (name, value) = (name.trim_ascii(), value.trim_ascii());
        if !is_token(name) {
            return None;
        }
        if name.eq_ignore_ascii_case(b"q") {
            weight = qvalue(value)?;
        }
    }
    Some((coding, weight))
}

fn split_once(bytes: &[u8], separator: u8) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&byte| byte == separator)?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

/// RFC 9110's `token` (5.6.2); `*` is one.
fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )` in thousandths.
fn qvalue(value: &[u8]) -> Option<u16> {
    let (whole, decimals) = match value.split_first()? {
        (b'0', rest) => (0, rest),
        (b'1', rest) => (1000, rest),
        _ => return None,
    };
    let digits = match decimals.split_first() {
        None => return Some(whole),
        Some((b'.', digits)) if digits.len() <= 3 => digits,
        Some(_) => return None,
    };
    let mut thousandths = 0;
    for (at, &digit) in digits.iter().enumerate() {
        if !digit.is_ascii_digit() {
            return None;
        }
        thousandths += u16::from(digit - b'0') * [100, 10, 1][at];
    }
    match whole + thousandths {
        weight @ 0..=1000 => Some(weight),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
