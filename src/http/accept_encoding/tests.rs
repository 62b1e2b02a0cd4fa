//! Accept-Encoding as RFC 9110 reads it, the order of codings tried, and any bytes at all
//! read without a panic.

use proptest::prelude::*;

use super::*;

/// The codings tried for a request with these Accept-Encoding lines, in order.
fn tried_lines(lines: &[&[u8]]) -> Vec<Coding> {
    let mut accepts = AcceptEncoding::default();
    for line in lines {
        accepts.read(line);
    }
    accepts.preferred().collect()
}

/// The codings tried for `value`, in order (`None`: no Accept-Encoding at all).
fn tried(value: Option<&str>) -> Vec<Coding> {
    tried_lines(value.map(str::as_bytes).as_slice())
}

#[test]
fn without_the_header_or_with_an_empty_one_only_identity() {
    assert_eq!(tried(None), []);
    assert_eq!(tried(Some("")), []);
    assert_eq!(tried(Some(" , ,")), []);
    assert_eq!(tried(Some("identity")), []);
    assert_eq!(tried(Some("deflate, zstd, compress")), []);
}

#[test]
fn br_before_gzip_at_equal_weights_else_the_heavier_first() {
    use Coding::{Br, Gzip};
    let cases: [(&str, &[Coding]); 14] = [
        // HttpArena's h2load.
        ("br;q=1, gzip;q=0.8", &[Br, Gzip]),
        ("gzip, deflate, br", &[Br, Gzip]),
        ("gzip, deflate, br, zstd", &[Br, Gzip]),
        ("gzip", &[Gzip]),
        ("br", &[Br]),
        ("gzip;q=1.0, br;q=0.5", &[Gzip, Br]),
        ("gzip;q=0.501, br;q=0.5", &[Gzip, Br]),
        ("gzip;q=0.5, br;q=0.5", &[Br, Gzip]),
        ("x-gzip", &[Gzip]),
        ("*", &[Br, Gzip]),
        ("*;q=0.5, gzip", &[Gzip, Br]),
        ("BR;Q=1, GZip", &[Br, Gzip]),
        ("  br  ;  q=1  ,\tgzip\t;q=0.9 ", &[Br, Gzip]),
        ("br;level=5;q=0.2, gzip;q=0.3", &[Gzip, Br]),
    ];
    for (value, expected) in cases {
        assert_eq!(tried(Some(value)), expected, "{value:?}");
    }
}

#[test]
fn q_zero_refuses_and_identity_weighs_in() {
    use Coding::{Br, Gzip};
    let cases: [(&str, &[Coding]); 15] = [
        ("br;q=0, gzip", &[Gzip]),
        ("br;q=0.000, gzip;q=0.0", &[]),
        ("*;q=0", &[]),
        ("*;q=0, br", &[Br]),
        ("gzip, *;q=0", &[Gzip]),
        ("*, br;q=0", &[Gzip]),
        // Identity heavier than a coding: the file as it is.
        ("gzip;q=0.5, identity", &[]),
        ("gzip;q=0.5, identity;q=0.5", &[Gzip]),
        ("br;q=0.2, gzip;q=0.7, identity;q=0.5", &[Gzip]),
        ("br, identity;q=0", &[Br]),
        ("gzip;q=0.001, *;q=0", &[Gzip]),
        // Identity not named weighs against nothing.
        ("br;q=0.1, gzip;q=0.2", &[Gzip, Br]),
        ("*;q=0.3", &[Br, Gzip]),
        ("*;q=0.3, identity", &[]),
        // The first element naming a coding counts.
        ("br;q=0, br", &[]),
    ];
    for (value, expected) in cases {
        assert_eq!(tried(Some(value)), expected, "{value:?}");
    }
}

#[test]
fn a_repeated_field_is_one_list_its_lines_in_order() {
    use Coding::{Br, Gzip};
    let cases: [(&[&[u8]], &[Coding]); 6] = [
        (&[b"gzip", b"br"], &[Br, Gzip]),
        (&[b"gzip;q=0.5", b"br;q=0.4"], &[Gzip, Br]),
        (&[b"gzip;q=0.5", b"", b"identity"], &[]),
        // The first element naming a coding counts, whichever line it is on.
        (&[b"br;q=0", b"br, gzip"], &[Gzip]),
        (&[b"*;q=0", b"gzip"], &[Gzip]),
        (&[b"deflate", b"x-gzip;q=0.1, br;q=0.1"], &[Br, Gzip]),
    ];
    for (lines, expected) in cases {
        assert_eq!(tried_lines(lines), expected, "{lines:?}");
    }
}

#[test]
fn malformed_elements_are_skipped_and_the_rest_read() {
    use Coding::{Br, Gzip};
    let cases: [(&str, &[Coding]); 12] = [
        ("br;q=2, gzip", &[Gzip]),
        ("br;q=1.5, gzip", &[Gzip]),
        ("br;q=1.001, gzip", &[Gzip]),
        ("br;q=0.1234, gzip", &[Gzip]),
        ("br;q=-1, gzip", &[Gzip]),
        ("br;q=, gzip", &[Gzip]),
        ("br;q, gzip", &[Gzip]),
        ("br;q=.5, gzip", &[Gzip]),
        ("b r, gzip", &[Gzip]),
        ("br;=1, gzip", &[Gzip]),
        ("\"br\", gzip;q=0.5", &[Gzip]),
        ("br;q=1., gzip;q=0.", &[Br]),
    ];
    for (value, expected) in cases {
        assert_eq!(tried(Some(value)), expected, "{value:?}");
    }
}

#[test]
fn qvalues_read_to_the_thousandth() {
    let cases: [(&str, Option<u16>); 12] = [
        ("0", Some(0)),
        ("1", Some(1000)),
        ("1.", Some(1000)),
        ("1.000", Some(1000)),
        ("0.8", Some(800)),
        ("0.08", Some(80)),
        ("0.008", Some(8)),
        ("0.999", Some(999)),
        ("1.1", None),
        ("0.0000", None),
        ("01", None),
        ("", None),
    ];
    for (value, expected) in cases {
        assert_eq!(qvalue(value.as_bytes()), expected, "{value:?}");
    }
}

proptest! {
    /// A list cut into lines anywhere between its elements reads as the list.
    #[test]
    fn a_list_split_over_lines_reads_as_one(
        elements in proptest::collection::vec("(br|gzip|identity|\\*|deflate)(;q=(0|1|0\\.[0-9]{1,3}))?", 0..6),
        cuts in proptest::collection::vec(any::<bool>(), 6),
    ) {
        let mut lines = vec![String::new()];
        for (index, element) in elements.iter().enumerate() {
            let line = lines.last_mut().expect("one line at least");
            if !line.is_empty() {
                line.push_str(", ");
            }
            line.push_str(element);
            if cuts[index] {
                lines.push(String::new());
            }
        }
        let lines: Vec<&[u8]> = lines.iter().map(|line| line.as_bytes()).collect();
        prop_assert_eq!(tried_lines(&lines), tried(Some(&elements.join(","))));
    }

    /// Any bytes: an answer, no panic, and never a coding the value does not mention.
    #[test]
    fn any_bytes_read_without_panic(value in proptest::collection::vec(any::<u8>(), 0..64)) {
        let codings = tried_lines(&[&value]);
        prop_assert!(codings.len() <= 2);
        let lower = value.to_ascii_lowercase();
        let mentions = |needle: &[u8]| lower.windows(needle.len()).any(|w| w == needle);
        if !mentions(b"*") {
            prop_assert!(!codings.contains(&Coding::Br) || mentions(b"br"));
            prop_assert!(!codings.contains(&Coding::Gzip) || mentions(b"gzip"));
        }
    }

    /// Lists made of the grammar's pieces, with blanks and case anywhere: the order tried
    /// is the heavier first, br first of two equal, and nothing refused or outweighed by
    /// identity.
    #[test]
    fn lists_of_weighed_codings_are_ordered_by_weight(
        br in proptest::option::of(0u16..=1000),
        gzip in proptest::option::of(0u16..=1000),
        identity in proptest::option::of(0u16..=1000),
        upper in any::<bool>(),
        blanks in "[ \t]{0,2}",
    ) {
        let mut elements = Vec::new();
        for (name, weight) in [("br", br), ("gzip", gzip), ("identity", identity)] {
            if let Some(weight) = weight {
                let name = if upper { name.to_uppercase() } else { name.to_string() };
                let q = format!("{}.{:03}", weight / 1000, weight % 1000);
                elements.push(format!("{blanks}{name}{blanks};{blanks}q={q}{blanks}"));
            }
        }
        let value = elements.join(",");
        let codings = tried(Some(&value));
        let identity = identity.unwrap_or(0);
        let mut expected: Vec<(Coding, u16)> = [(Coding::Br, br), (Coding::Gzip, gzip)]
            .into_iter()
            .filter_map(|(coding, weight)| Some((coding, weight?)))
            .filter(|&(_, weight)| weight > 0 && weight >= identity)
            .collect();
        expected.sort_by_key(|&(coding, weight)| (std::cmp::Reverse(weight), coding == Coding::Gzip));
        let expected: Vec<Coding> = expected.into_iter().map(|(coding, _)| coding).collect();
        prop_assert_eq!(codings, expected, "{:?}", value);
    }
}
