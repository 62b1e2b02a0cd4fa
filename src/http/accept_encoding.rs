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

/// A request's `Accept-Encoding`, read field line by field line: a field repeated is one
/// list, its lines joined by commas in order (RFC 9110, 5.3). The default, nothing read,
/// is a request without the header: it accepts identity alone (RFC 9110 would allow any
/// coding, but a client that does not ask gets the file as it is: what HttpArena checks,
/// and what every server does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcceptEncoding {
    /// The weight each coding is given, in thousandths (a qvalue has at most three
    /// decimals), by name or by `*`: the first element naming it counts.
    br: Option<u16>,
    gzip: Option<u16>,
    identity: Option<u16>,
    any: Option<u16>,
}

impl AcceptEncoding {
    /// Reads one field line's list into what was read before it.
    pub fn read(&mut self, value: &[u8]) {
        for element in value.split(|&byte| byte == b',') {
            let Some((coding, weight)) = element_weight(element) else {
                continue;
            };
            let place = match coding {
                c if c.eq_ignore_ascii_case(b"br") => &mut self.br,
                c if c.eq_ignore_ascii_case(b"gzip") || c.eq_ignore_ascii_case(b"x-gzip") => {
                    &mut self.gzip
                }
                c if c.eq_ignore_ascii_case(b"identity") => &mut self.identity,
                b"*" => &mut self.any,
                _ => continue,
            };
            place.get_or_insert(weight);
        }
    }

    /// The codings to try, best first, before the file as it is: each acceptable and
    /// weighed at least as high as identity (a coding is smaller, so it wins a tie), the
    /// heavier first, `br` first of two equal. A coding not named weighs as `*`, or 0:
    /// not acceptable; identity not named weighs 0 too, as it then outweighs no coding
    /// (and is served all the same when no coding is).
    pub fn preferred(self) -> impl Iterator<Item = Coding> {
        let weight = |given: Option<u16>| given.or(self.any).unwrap_or(0);
        let (br, gzip, identity) = (weight(self.br), weight(self.gzip), weight(self.identity));
        let ranked = match gzip > br {
            true => [(Coding::Gzip, gzip), (Coding::Br, br)],
            false => [(Coding::Br, br), (Coding::Gzip, gzip)],
        };
        ranked
            .into_iter()
            .filter(move |&(_, weight)| weight > 0 && weight >= identity)
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
