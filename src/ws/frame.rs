//! RFC 6455's frames (section 5): a client's frame header read from the front of a buffer,
//! its payload unmasked in place, and a server's frames written unmasked. No I/O.

/// Close codes sent (RFC 6455, 7.4.1).
pub const NORMAL: u16 = 1000;
/// The server is shutting down (RFC 6455 7.4.1).
pub const GOING_AWAY: u16 = 1001;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const INVALID_DATA: u16 = 1007;
pub const TOO_BIG: u16 = 1009;

/// The longest header a frame has: 2 bytes, a 64-bit length and the mask.
pub const MAX_HEADER: usize = 14;
/// The longest payload of a control frame (ping, pong, close).
const MAX_CONTROL: usize = 125;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    /// The opcode of the low four bits; the reserved ones are `None`.
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// A client frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub fin: bool,
    pub opcode: Opcode,
    pub mask: [u8; 4],
    /// Bytes of the header; the payload follows.
    pub len: usize,
    pub payload_len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Frame(Header),
    /// More bytes are needed for the header.
    Partial,
    /// The frame breaks the protocol, or its payload is over the limit: close with this code.
    Invalid(u16),
}

/// Reads the header of the client frame at the front of `buf`. Reserved bits or opcodes, an
/// unmasked frame, a fragmented or long control frame, a length with its top bit set:
/// [`PROTOCOL_ERROR`]; a payload longer than `max_payload`: [`TOO_BIG`], known from the
/// header alone, before any of it is held.
pub fn decode(buf: &[u8], max_payload: usize) -> Decoded {
    let [first, second, ..] = *buf else {
        return Decoded::Partial;
    };
    let fin = first & 0x80 != 0;
    let Some(opcode) = Opcode::from_bits(first & 0x0F) else {
        return Decoded::Invalid(PROTOCOL_ERROR);
    };
    let masked = second & 0x80 != 0;
    if first & 0x70 != 0 || !masked {
        return Decoded::Invalid(PROTOCOL_ERROR);
    }
    let (extended, short) = match second & 0x7F {
        126 => (2, None),
        127 => (8, None),
        len => (0, Some(len as u64)),
    };
    let len = 2 + extended + 4;
    let Some(header) = buf.get(..len) else {
        return Decoded::Partial;
    };
    let payload_len = short.unwrap_or_else(|| {
        let mut bytes = [0; 8];
        bytes[8 - extended..].copy_from_slice(&header[2..2 + extended]);
        u64::from_be_bytes(bytes)
    });
    if payload_len >> 63 != 0 {
        return Decoded::Invalid(PROTOCOL_ERROR);
    }
    if opcode.is_control() && (!fin || payload_len > MAX_CONTROL as u64) {
        return Decoded::Invalid(PROTOCOL_ERROR);
    }
    if payload_len > max_payload as u64 {
        return Decoded::Invalid(TOO_BIG);
    }
    let mut mask = [0; 4];
    mask.copy_from_slice(&header[len - 4..]);
    Decoded::Frame(Header {
        fin,
        opcode,
        mask,
        len,
        payload_len: payload_len as usize,
    })
}

/// Unmasks a whole payload in place, eight bytes at a time.
pub fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    let [a, b, c, d] = mask;
    let word = u64::from_ne_bytes([a, b, c, d, a, b, c, d]);
    let mut words = payload.chunks_exact_mut(8);
    for chunk in &mut words {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(bytes) ^ word).to_ne_bytes());
    }
    // The rest starts at a multiple of 8, so at the mask's first byte.
    for (byte, key) in words.into_remainder().iter_mut().zip(mask.iter().cycle()) {
        *byte ^= key;
    }
}

/// Appends a whole, unmasked frame (a server's) to `out`.
pub fn write(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8]) {
    let first = 0x80 | opcode.bits();
    let len = payload.len();
    match len {
        0..=125 => out.extend_from_slice(&[first, len as u8]),
        126..=0xFFFF => {
            out.extend_from_slice(&[first, 126]);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.extend_from_slice(&[first, 127]);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// Appends a close frame with `code` and no reason.
pub fn write_close(out: &mut Vec<u8>, code: u16) {
    write(out, Opcode::Close, &code.to_be_bytes());
}

/// Whether a peer may send `code` in a close frame (RFC 6455, 7.4; IANA's registry): the
/// defined codes but those that must never be sent (1004 to 1006, 1015), and 3000 to 4999.
pub fn is_valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Checks text that arrives in pieces: the bytes of a character cut between two pieces (at
/// most three) wait for the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Utf8 {
    pending: [u8; 4],
    len: u8,
}

impl Utf8 {
    /// Takes the next piece; false once the text cannot be valid UTF-8, however it goes on.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        if self.len > 0 {
            let have = self.len as usize;
            let width = match self.pending[0] {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            let take = (width - have).min(bytes.len());
            self.pending[have..have + take].copy_from_slice(&bytes[..take]);
            self.len += take as u8;
            bytes = &bytes[take..];
            match std::str::from_utf8(&self.pending[..self.len as usize]) {
                Ok(_) => self.len = 0,
                // Still cut short: then `bytes` is used up.
                Err(error) if error.error_len().is_none() => return true,
                Err(_) => return false,
            }
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => true,
            Err(error) if error.error_len().is_none() => {
                let tail = &bytes[error.valid_up_to()..];
                self.pending[..tail.len()].copy_from_slice(tail);
                self.len = tail.len() as u8;
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the text so far ends on a whole character.
    pub fn is_complete(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's frame: masked with a fixed key.
    fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1, 2, 3, 4];
        let mut frame = vec![first];
        match payload.len() {
            len @ 0..=125 => frame.push(0x80 | len as u8),
            len @ 126..=0xFFFF => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        let start = frame.len();
        frame.extend_from_slice(payload);
        for (i, byte) in frame[start..].iter_mut().enumerate() {
            *byte ^= mask[i % 4];
        }
        frame
    }

    #[test]
    fn headers_of_every_length_encoding_and_their_payloads_unmasked() {
        for len in [0, 1, 7, 8, 9, 125, 126, 127, 65_535, 65_536, 70_001] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let frame = masked(0x82, &payload);
            let Decoded::Frame(header) = decode(&frame, 1 << 20) else {
                panic!("{len}: {:?}", decode(&frame, 1 << 20));
            };
            assert_eq!((header.fin, header.opcode), (true, Opcode::Binary));
            assert_eq!(header.payload_len, len);
            assert_eq!(header.len + len, frame.len());
            let mut body = frame[header.len..].to_vec();
            unmask(&mut body, header.mask);
            assert_eq!(body, payload, "{len}");
            // Every cut of the header is partial.
            for cut in 0..header.len {
                assert_eq!(
                    decode(&frame[..cut], 1 << 20),
                    Decoded::Partial,
                    "{len} {cut}"
                );
            }
        }
    }

    #[test]
    fn broken_frames_are_protocol_errors_and_long_ones_too_big() {
        let invalid = |frame: &[u8]| match decode(frame, 1000) {
            Decoded::Invalid(code) => code,
            other => panic!("{frame:?}: {other:?}"),
        };
        // Reserved bits, reserved opcodes, unmasked.
        for first in [0xC1, 0xA1, 0x91, 0x83, 0x87, 0x8B, 0x8F] {
            assert_eq!(invalid(&masked(first, b"x")), PROTOCOL_ERROR, "{first:x}");
        }
        assert_eq!(invalid(&[0x81, 0x01, b'x']), PROTOCOL_ERROR);
        // A fragmented ping, a 126-byte ping.
        assert_eq!(invalid(&masked(0x09, b"")), PROTOCOL_ERROR);
        assert_eq!(invalid(&masked(0x89, &[0; 126])), PROTOCOL_ERROR);
        // Over the limit, known from the header alone; a length with its top bit set.
        assert_eq!(invalid(&masked(0x82, &[0; 1001])[..8]), TOO_BIG);
        let mut huge = vec![0x82, 0xFF];
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        huge.extend_from_slice(&[0; 4]);
        assert_eq!(invalid(&huge), PROTOCOL_ERROR);
        assert!(matches!(
            decode(&masked(0x89, &[0; 125]), 0),
            Decoded::Invalid(_)
        ));
    }

    #[test]
    fn frames_written_with_the_shortest_length() {
        for (len, header) in [(0, 2), (125, 2), (126, 4), (65_535, 4), (65_536, 10)] {
            let mut out = Vec::new();
            write(&mut out, Opcode::Text, &vec![b'a'; len]);
            assert_eq!(out.len(), header + len);
            assert_eq!(out[0], 0x81);
        }
        let mut out = Vec::new();
        write_close(&mut out, NORMAL);
        assert_eq!(out, [0x88, 2, 0x03, 0xE8]);
    }

    #[test]
    fn utf8_checked_across_every_cut() {
        let text = "κόσμε aé€𝄞 z".as_bytes();
        for cut in 0..=text.len() {
            for second in cut..=text.len() {
                let mut utf8 = Utf8::default();
                assert!(utf8.feed(&text[..cut]));
                assert!(utf8.feed(&text[cut..second]));
                assert!(utf8.feed(&text[second..]));
                assert!(utf8.is_complete(), "{cut} {second}");
            }
        }
        // Invalid however cut: a surrogate, an overlong form, a code point past U+10FFFF.
        for bad in [
            &b"a\xED\xA0\x80b"[..],
            b"\xC0\xAF",
            b"\xF4\x90\x80\x80",
            b"\xFF",
        ] {
            for cut in 0..=bad.len() {
                let mut utf8 = Utf8::default();
                let fine = utf8.feed(&bad[..cut]) && utf8.feed(&bad[cut..]);
                assert!(!fine, "{bad:?} cut at {cut}");
            }
        }
        let mut unfinished = Utf8::default();
        assert!(unfinished.feed("€".as_bytes().split_last().unwrap().1));
        assert!(!unfinished.is_complete());
    }

    #[test]
    fn close_codes() {
        for code in [1000, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999] {
            assert!(is_valid_close_code(code), "{code}");
        }
        for code in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535,
        ] {
            assert!(!is_valid_close_code(code), "{code}");
        }
    }
}
