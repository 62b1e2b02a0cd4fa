//! The query string's parameters, as the routes read them.

/// TFB's rule for the count of queries or cached objects: missing, empty or not an integer
/// is 1, and the value is clamped to 1..=500.
pub fn count_param(query: &str, name: &str) -> usize {
    let value = param(query, name).unwrap_or("");
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 1;
    }
    if value.starts_with('-') {
        return 1;
    }
    // All digits: too long to parse still means "more than 500".
    digits.parse::<usize>().map_or(500, |n| n.clamp(1, 500))
}

/// The value of the first `name=` in the query string.
pub fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_tfb_rules() {
        let cases = [
            ("queries=2", 2),
            ("queries=0", 1),
            ("queries=foo", 1),
            ("queries=501", 500),
            ("queries=", 1),
            ("", 1),
            ("queries=-3", 1),
            ("queries=+7", 7),
            ("queries=99999999999999999999999", 500),
            ("x=1&queries=20", 20),
            ("queriesx=20", 1),
            ("queries=5&queries=9", 5),
        ];
        for (query, expected) in cases {
            assert_eq!(count_param(query, "queries"), expected, "{query}");
        }
    }
}
