//! The fortunes page: rows from the `fortune` table plus one added at request time, sorted
//! by message and rendered as an HTML table with every message escaped.

/// The rows of one request, kept in two reusable buffers: the messages' text back to back,
/// and each row's id with the range of its message.
#[derive(Default)]
pub struct Fortunes {
    text: String,
    rows: Vec<(i32, std::ops::Range<usize>)>,
}

pub const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

impl Fortunes {
    pub fn clear(&mut self) {
        self.text.clear();
        self.rows.clear();
    }

    pub fn push(&mut self, id: i32, message: &str) {
        let start = self.text.len();
        self.text.push_str(message);
        self.rows.push((id, start..self.text.len()));
    }

    /// Adds the request-time row, sorts by message (byte order of the UTF-8 text, which is
    /// code-point order) and appends the page to `out`.
    pub fn render(&mut self, out: &mut Vec<u8>) {
        self.push(0, ADDED_FORTUNE);
        let text = &self.text;
        self.rows
            .sort_unstable_by(|(_, a), (_, b)| text[a.clone()].cmp(&text[b.clone()]));
        out.extend_from_slice(
            b"<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>",
        );
        for (id, message) in &self.rows {
            out.extend_from_slice(b"<tr><td>");
            out.extend_from_slice(itoa::Buffer::new().format(*id).as_bytes());
            out.extend_from_slice(b"</td><td>");
            escape_html(&self.text[message.clone()], out);
            out.extend_from_slice(b"</td></tr>");
        }
        out.extend_from_slice(b"</table></body></html>");
    }
}

/// Appends `text` with `& < > " '` replaced by their character references.
pub fn escape_html(text: &str, out: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    let mut plain_from = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let reference: &[u8] = match byte {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&#39;",
            _ => continue,
        };
        out.extend_from_slice(&bytes[plain_from..i]);
        out.extend_from_slice(reference);
        plain_from = i + 1;
    }
    out.extend_from_slice(&bytes[plain_from..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = Vec::new();
        escape_html(text, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_the_five_characters_and_nothing_else() {
        assert_eq!(escaped(r#"a&b<c>d"e'f"#), "a&amp;b&lt;c&gt;d&quot;e&#39;f");
        assert_eq!(
            escaped("フレームワークのベンチマーク — ok"),
            "フレームワークのベンチマーク — ok"
        );
        assert_eq!(escaped(""), "");
        assert_eq!(
            escaped(r#"<script>alert("This should not be displayed in a browser alert box.");</script>"#),
            "&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;"
        );
    }

    #[test]
    fn adds_the_request_time_row_and_sorts_by_bytes() {
        let mut fortunes = Fortunes::default();
        fortunes.push(12, "フレームワークのベンチマーク");
        fortunes.push(1, "fortune: No such file or directory");
        fortunes.push(11, "<script>");
        fortunes.push(9, "Feature: A bug with seniority.");
        let mut page = Vec::new();
        fortunes.render(&mut page);
        let page = String::from_utf8(page).unwrap();
        let expected = concat!(
            "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>",
            "<tr><td>11</td><td>&lt;script&gt;</td></tr>",
            "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>",
            "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>",
            "<tr><td>1</td><td>fortune: No such file or directory</td></tr>",
            "<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>",
            "</table></body></html>"
        );
        assert_eq!(page, expected);
    }
}
