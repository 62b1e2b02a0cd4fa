use std::time::{SystemTime, UNIX_EPOCH};

/// The `Date` header value (IMF-fixdate), formatted at most once per second.
///
/// Each worker thread keeps its own copy and calls [`HttpDate::refresh`] once per loop
/// iteration, so no response carries a date more than a second old and nothing is shared.
pub struct HttpDate {
    second: u64,
    value: [u8; 29],
}

impl HttpDate {
    pub fn new() -> Self {
        let mut date = HttpDate {
            second: u64::MAX,
            value: [0; 29],
        };
        date.refresh();
        date
    }

    /// Reformats the value when the wall-clock second has changed.
    pub fn refresh(&mut self) {
        self.refresh_at(SystemTime::now());
    }

    fn refresh_at(&mut self, now: SystemTime) {
        let second = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        if second != self.second {
            self.second = second;
            let formatted =
                httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(second));
            // IMF-fixdate always has 29 bytes: "Sun, 06 Nov 1994 08:49:37 GMT".
            self.value.copy_from_slice(&formatted.as_bytes()[..29]);
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.value
    }
}

impl Default for HttpDate {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_imf_fixdate() {
        let mut date = HttpDate::new();
        date.refresh_at(UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(date.as_bytes(), b"Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn changes_when_the_second_changes_and_only_then() {
        let mut date = HttpDate::new();
        let start = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        date.refresh_at(start);
        let first = date.as_bytes().to_vec();
        date.refresh_at(start + Duration::from_millis(999));
        assert_eq!(date.as_bytes(), &first[..]);
        date.refresh_at(start + Duration::from_secs(1));
        assert_ne!(date.as_bytes(), &first[..]);
        assert_eq!(
            httpdate::parse_http_date(std::str::from_utf8(date.as_bytes()).unwrap()).unwrap(),
            start + Duration::from_secs(1)
        );
    }

    #[test]
    fn refresh_follows_the_clock() {
        let mut date = HttpDate::new();
        let before = date.as_bytes().to_vec();
        std::thread::sleep(Duration::from_millis(1100));
        date.refresh();
        assert_ne!(date.as_bytes(), &before[..]);
    }
}
