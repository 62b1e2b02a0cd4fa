//! The fortunes page: rows from the `fortune` table plus one added at request time, sorted
//! by message and rendered through a compile-time template (`templates/fortunes.stpl`,
//! sailfish) that HTML-escapes every message.

use sailfish::runtime::Buffer;
use sailfish::TemplateSimple;

/// The rows of one request, kept in reusable buffers: the messages' text back to back, each
/// row's id with the range of its message, and the page the template renders.
#[derive(Default)]
pub struct Fortunes {
    text: String,
    rows: Vec<(i32, std::ops::Range<usize>)>,
    page: Buffer,
}

pub const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

/// What the template sees. `rm_newline` drops the template's own line breaks, so the page
/// is one line; `<%= %>` escapes `& < > " '`.
#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl", rm_newline = true)]
struct FortunesPage<'a> {
    fortunes: &'a Rows<'a>,
}

/// The rows in their current order, as (id, message).
struct Rows<'a> {
    text: &'a str,
    rows: &'a [(i32, std::ops::Range<usize>)],
}

impl Rows<'_> {
    fn rows(&self) -> impl Iterator<Item = (i32, &str)> {
        self.rows
            .iter()
            .map(|(id, message)| (*id, &self.text[message.clone()]))
    }
}

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
        let Fortunes { text, rows, page } = self;
        rows.sort_unstable_by(|(_, a), (_, b)| text[a.clone()].cmp(&text[b.clone()]));
        page.clear();
        let fortunes = Rows { text, rows };
        FortunesPage {
            fortunes: &fortunes,
        }
        .render_once_to(page)
        // Only a template that returns an error itself can fail; this one writes integers
        // and strings into memory.
        .expect("rendering the fortunes template");
        out.extend_from_slice(page.as_str().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(rows: &[(i32, &str)]) -> String {
        let mut fortunes = Fortunes::default();
        for &(id, message) in rows {
            fortunes.push(id, message);
        }
        let mut page = Vec::new();
        fortunes.render(&mut page);
        String::from_utf8(page).unwrap()
    }

    #[test]
    fn escapes_the_five_characters_and_nothing_else() {
        let page = page(&[
            (1, r#"a&b<c>d"e'f"#),
            (2, "フレームワークのベンチマーク — ok"),
            (3, ""),
            (
                11,
                r#"<script>alert("This should not be displayed in a browser alert box.");</script>"#,
            ),
        ]);
        assert!(page.contains("<td>1</td><td>a&amp;b&lt;c&gt;d&quot;e&#039;f</td>"));
        assert!(page.contains("<td>2</td><td>フレームワークのベンチマーク — ok</td>"));
        assert!(page.contains("<td>3</td><td></td>"));
        assert!(page.contains(
            "<td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td>"
        ));
    }

    #[test]
    fn reused_buffers_render_the_same_page() {
        let mut fortunes = Fortunes::default();
        let mut first = Vec::new();
        fortunes.push(2, "b");
        fortunes.push(1, "a");
        fortunes.render(&mut first);
        fortunes.clear();
        let mut second = b"before".to_vec();
        fortunes.push(1, "a");
        fortunes.push(2, "b");
        fortunes.render(&mut second);
        assert_eq!(&second[..6], b"before");
        assert_eq!(second[6..], first[..]);
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
