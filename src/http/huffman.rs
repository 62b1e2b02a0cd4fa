//! The Huffman code of string literals (RFC 7541, 5.2 and Appendix B), which HPACK
//! (HTTP/2) and QPACK (HTTP/3, RFC 9204 4.1.2) share: decoded four bits at a time through a
//! table built at compile time, and encoded for the few values an answer gains by it.
//!
//! Appendix B's code is canonical: codes are given in order of length, and within a length
//! in order of symbol, so each symbol's length is all the code there is (`CODE_LENGTHS`),
//! and the codes follow (`codes`; a test checks them against Appendix B's). From the codes,
//! the tree of the code: its 256 inner nodes are the states of the decoder, and for each
//! state and each four bits, `TRANSITIONS` says the state reached, the symbol completed on
//! the way if any (at most one: no code is shorter than five bits), whether the way went
//! through EOS, and whether the string may end there: at the root, or in the middle of the
//! EOS code's first seven bits (its padding, which is all ones, RFC 7541 5.2).

/// Each symbol's code length in bits: bytes 0 to 255, then EOS (RFC 7541, Appendix B).
#[rustfmt::skip]
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 16
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,         // 32 ' '
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,              // 48 '0'
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,                // 64 '@'
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,             // 80 'P'
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,                // 96 '`'
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,            // 112 'p'
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240
    30,                                                             // EOS
];

const EOS: usize = 256;

/// Each symbol's code, in the low bits: the canonical code of `CODE_LENGTHS`.
const fn codes() -> [u32; 257] {
    let mut codes = [0; 257];
    let mut next = 0;
    let mut length = 1;
    while length <= 30 {
        let mut symbol = 0;
        while symbol <= EOS {
            if CODE_LENGTHS[symbol] == length {
                codes[symbol] = next;
                next += 1;
            }
            symbol += 1;
        }
        next <<= 1;
        length += 1;
    }
    codes
}

/// One step of the decoder: the state after four bits, and what happened on the way.
#[derive(Clone, Copy)]
struct Transition {
    next: u8,
    symbol: u8,
    flags: u8,
}

/// A symbol was completed: `symbol`.
const EMITS: u8 = 1;
/// The string may end in the state reached.
const MAY_END: u8 = 2;
/// EOS was completed: an error.
const FAILS: u8 = 4;

/// A child in the tree that is a symbol rather than an inner node.
const LEAF: u16 = 0x200;

const TRANSITIONS: [[Transition; 16]; 256] = transitions();

const fn transitions() -> [[Transition; 16]; 256] {
    let codes = codes();
    // The tree: `children[node][bit]`, an inner node's number or `LEAF | symbol`; 0 is
    // the root, never a child, so it also marks a child not made yet.
    let mut children = [[0u16; 2]; 256];
    let mut inner_nodes = 1;
    let mut symbol = 0;
    while symbol <= EOS {
        let code = codes[symbol];
        let mut bit = CODE_LENGTHS[symbol] as u32 - 1;
        let mut node = 0;
        while bit > 0 {
            let branch = ((code >> bit) & 1) as usize;
            if children[node][branch] == 0 {
                children[node][branch] = inner_nodes;
                inner_nodes += 1;
            }
            node = children[node][branch] as usize;
            bit -= 1;
        }
        children[node][(code & 1) as usize] = LEAF | symbol as u16;
        symbol += 1;
    }
    // Where a string may end: the root, and the inner nodes on EOS's first seven bits.
    let mut may_end = [false; 256];
    may_end[0] = true;
    let mut node = 0;
    let mut depth = 0;
    while depth < 7 {
        node = children[node][1] as usize;
        may_end[node] = true;
        depth += 1;
    }
    let mut table = [[Transition {
        next: 0,
        symbol: 0,
        flags: 0,
    }; 16]; 256];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut step = Transition {
                next: 0,
                symbol: 0,
                flags: 0,
            };
            let mut node = state;
            let mut bit = 4;
            while bit > 0 {
                bit -= 1;
                let child = children[node][(nibble >> bit) & 1];
                if child & LEAF == 0 {
                    node = child as usize;
                } else {
                    let symbol = (child & !LEAF) as usize;
                    if symbol == EOS {
                        step.flags |= FAILS;
                    } else {
                        step.flags |= EMITS;
                        step.symbol = symbol as u8;
                    }
                    node = 0;
                }
            }
            step.next = node as u8;
            if may_end[node] {
                step.flags |= MAY_END;
            }
            table[state][nibble] = step;
            nibble += 1;
        }
        state += 1;
    }
    table
}

/// Why a Huffman-coded string is refused (RFC 7541, 5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The string ends with more than seven bits of padding, or with bits that are not
    /// EOS's first ones.
    Padding,
    /// The string holds EOS.
    Eos,
}

/// Decodes a Huffman-coded string, appending it to `out`.
pub fn decode(encoded: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    // At most 8/5 of a byte a byte: no code is shorter than five bits.
    out.reserve(encoded.len() * 8 / 5);
    let mut state = 0;
    let mut may_end = true;
    for &byte in encoded {
        for nibble in [byte >> 4, byte & 0xf] {
            let step = TRANSITIONS[state][nibble as usize];
            if step.flags & FAILS != 0 {
                return Err(HuffmanError::Eos);
            }
            if step.flags & EMITS != 0 {
                out.push(step.symbol);
            }
            state = step.next as usize;
            may_end = step.flags & MAY_END != 0;
        }
    }
    if may_end {
        Ok(())
    } else {
        Err(HuffmanError::Padding)
    }
}

/// The length of `bytes` Huffman-coded, padding included.
pub fn encoded_len(bytes: &[u8]) -> usize {
    let bits: usize = bytes
        .iter()
        .map(|&byte| usize::from(CODE_LENGTHS[byte as usize]))
        .sum();
    bits.div_ceil(8)
}

/// The canonical codes, computed once at compile time.
const CODES: [u32; 257] = codes();

/// Appends `bytes` Huffman-coded, the last byte padded with ones (EOS's first bits).
pub fn encode(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(encoded_len(bytes));
    // At most 30 bits a code and fewer than 8 pending: 64 bits never overflow.
    let (mut bits, mut pending) = (0u64, 0u32);
    for &byte in bytes {
        let length = u32::from(CODE_LENGTHS[byte as usize]);
        bits = (bits << length) | u64::from(CODES[byte as usize]);
        pending += length;
        while pending >= 8 {
            pending -= 8;
            out.push((bits >> pending) as u8);
        }
    }
    if pending > 0 {
        out.push((bits << (8 - pending)) as u8 | (0xff >> pending));
    }
}

#[cfg(test)]
mod tests;

/// Bytes from hex digits, whitespace ignored: the RFCs' examples (RFC 7541's, RFC 9204's)
/// as the tests write them.
#[cfg(test)]
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace())
        .collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}
