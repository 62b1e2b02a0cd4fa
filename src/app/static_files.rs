//! `GET /static/{name}`: a file of one directory (`STATIC_DIR`, else [`STATIC_DIR`]), read
//! from disk on every request as HttpArena's static profiles demand (no cache, no mmap), its
//! Content-Type by its extension.
//!
//! A name is one plain file name: letters, digits, `-`, `_`, `.` and `~` (RFC 3986's
//! unreserved characters, so nothing percent-encoded), not beginning with a dot, at most 255
//! bytes. So no `..`, no `/`, no NUL, no escape of any kind can reach outside the
//! directory; the file is opened without following a symbolic link (`O_NOFOLLOW`: one
//! pointing out of the directory, or anywhere, is not served), and only a regular file is
//! served. Anything else, and a file that is not there, is 404.
//!
//! Precompressed sidecars, as nginx's `gzip_static` and `brotli_static` serve them: for a
//! file of a type that compresses (text, JSON, SVG, XML, WASM, icons; not images, fonts or
//! archives, which are compressed already, nor a file of unknown type, such as `X.br` asked
//! for by its own name), a request whose `Accept-Encoding` prefers `br` or `gzip` gets
//! `X.br` or `X.gz` beside `X` if that is a regular file (the same rules: a plain name,
//! `O_NOFOLLOW`, read per request), with `Content-Encoding`, `X`'s Content-Type and its own
//! length; the next coding accepted, else `X` itself, when it is not. Without the header,
//! `X` as it is. A client that refuses identity (`identity;q=0`) and gets no sidecar gets
//! `X` all the same: RFC 9110 would allow a 415, which helps no one. Every answer of such a
//! type says `Vary: Accept-Encoding`, with a sidecar or not: whether one exists is not known
//! without opening it (it may appear at any time), and a cache must not hand a compressed
//! answer to a client that did not ask, nor keep the plain one for those that did; images
//! and fonts are never negotiated, and say nothing.
//!
//! Per request: `openat`, `statx` (regular? how long?), one `read` straight into the
//! response's buffer behind its head (no copy before, no zero-filling), `close`. HEAD skips
//! the read. A sidecar is tried only for a type that compresses and a request that accepts
//! a coding: other requests pay no failed `openat`.

use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::http::{
    is_unreserved, AcceptEncoding, Answer, Body, Coding, ContentType, Encoding, FileBody, Status,
};

/// Where HttpArena mounts its static files, unless `STATIC_DIR` says otherwise.
pub const STATIC_DIR: &str = "/data/static";
/// The largest file served (a larger one is 500): a response is built whole in its
/// connection's output, so this bounds what one request can make a worker hold. HttpArena's
/// largest is 300 KiB (its HTTP/2 profile's docs say up to 400 KB); 1 MiB is the default
/// `--max-body` too, the most a request may bring in.
pub const MAX_FILE_LEN: u64 = 1024 * 1024;
/// The longest file name Linux takes (NAME_MAX).
const MAX_NAME_LEN: usize = 255;

/// The directory: `STATIC_DIR` in the environment, else [`STATIC_DIR`].
pub fn static_dir() -> PathBuf {
    std::env::var_os("STATIC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(STATIC_DIR))
}

/// One worker's access to the directory.
pub struct StaticFiles {
    /// The directory's path and a `/`, followed while opening by the name asked for.
    path: Vec<u8>,
    dir_len: usize,
}

/// A file opened for one request: its descriptor and length (as it was when opened: the
/// body's), and its type.
pub struct StaticFile {
    pub body: FileBody,
    pub content_type: ContentType,
}

impl StaticFiles {
    pub fn new(dir: &Path) -> Self {
        let mut path = dir.as_os_str().as_bytes().to_vec();
        path.push(b'/');
        let dir_len = path.len();
        StaticFiles { path, dir_len }
    }

    /// Opens the file `name` names, or its sidecar in the coding `accept_encoding` prefers
    /// (see the module's doc), with the encoding its answer says: 404 for a name that is
    /// not a plain file name or for no regular file under it, 500 for one over
    /// [`MAX_FILE_LEN`], 503 when the worker is out of descriptors.
    pub fn open(
        &mut self,
        name: &str,
        accept_encoding: AcceptEncoding,
    ) -> Result<(StaticFile, Encoding), Status> {
        if !is_plain_name(name) {
            return Err(Status::NotFound);
        }
        let content_type = content_type(name);
        let vary = compresses(content_type);
        if vary {
            for coding in accept_encoding.preferred() {
                let encoding = Encoding {
                    coding: Some(coding),
                    vary,
                };
                match self.open_regular(name, sidecar_suffix(coding), content_type) {
                    Ok(file) => return Ok((file, encoding)),
                    // The file itself would fail alike.
                    Err(Status::ServiceUnavailable) => return Err(Status::ServiceUnavailable),
                    // None there, or none to serve: the next coding, or the file itself.
                    Err(_) => {}
                }
            }
        }
        let file = self.open_regular(name, "", content_type)?;
        Ok((file, Encoding { coding: None, vary }))
    }

    /// Opens `name` followed by `suffix` if it is a regular file of at most
    /// [`MAX_FILE_LEN`], to be served as `content_type`.
    fn open_regular(
        &mut self,
        name: &str,
        suffix: &str,
        content_type: ContentType,
    ) -> Result<StaticFile, Status> {
        self.path.truncate(self.dir_len);
        self.path.extend_from_slice(name.as_bytes());
        self.path.extend_from_slice(suffix.as_bytes());
        let file = OpenOptions::new()
            .read(true)
            // O_NONBLOCK: a FIFO in the directory must not block the worker in open.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(Path::new(std::ffi::OsStr::from_bytes(&self.path)))
            .map_err(|error| open_failure(&error))?;
        let metadata = file.metadata().map_err(|_| Status::NotFound)?;
        if !metadata.is_file() {
            return Err(Status::NotFound);
        }
        if metadata.len() > MAX_FILE_LEN {
            return Err(Status::InternalServerError);
        }
        Ok(StaticFile {
            body: FileBody {
                file,
                // Below MAX_FILE_LEN: fits.
                len: metadata.len() as usize,
            },
            content_type,
        })
    }

    /// The answer to `GET /static/{name}` (or HEAD): the file, in the coding
    /// `accept_encoding` prefers when there is a sidecar in it, read by the protocol where
    /// its body goes.
    pub fn respond(&mut self, name: &str, accept_encoding: AcceptEncoding) -> Answer<'static> {
        match self.open(name, accept_encoding) {
            Ok((file, encoding)) => {
                let mut answer = Answer::ok(file.content_type, b"");
                answer.encoding = encoding;
                answer.body = Body::File(file.body);
                answer
            }
            Err(status) => Answer::error(status),
        }
    }
}

/// Why a name could not be opened, as a status: out of descriptors or memory is the
/// server's state (503, as for the database), anything else (no such file, a symbolic
/// link, no permission) is no file to serve.
fn open_failure(error: &std::io::Error) -> Status {
    match error.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM) => Status::ServiceUnavailable,
        _ => Status::NotFound,
    }
}

/// One file name of RFC 3986's unreserved characters, not a dot file (nor `.` or `..`).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && name.bytes().all(is_unreserved)
}

/// Whether files of this type may have precompressed sidecars: the types that compress.
fn compresses(content_type: ContentType) -> bool {
    use ContentType::*;
    matches!(
        content_type,
        Plain | Json | Html | Css | JavaScript | Svg | Xml | Wasm | Icon
    )
}

/// The sidecar of a file in `coding`: `X.br`, `X.gz`.
fn sidecar_suffix(coding: Coding) -> &'static str {
    match coding {
        Coding::Br => ".br",
        Coding::Gzip => ".gz",
    }
}

/// The type of a file by its extension (ASCII case ignored); unknown: bytes.
fn content_type(name: &str) -> ContentType {
    let extension = name.rsplit_once('.').map_or("", |(_, extension)| extension);
    let mut lower = [0; 5];
    let Some(lower) = lower.get_mut(..extension.len()) else {
        return ContentType::OctetStream;
    };
    lower.copy_from_slice(extension.as_bytes());
    lower.make_ascii_lowercase();
    match &*lower {
        b"css" => ContentType::Css,
        b"js" | b"mjs" => ContentType::JavaScript,
        b"json" => ContentType::Json,
        b"html" | b"htm" => ContentType::Html,
        b"txt" => ContentType::Plain,
        b"svg" => ContentType::Svg,
        b"webp" => ContentType::Webp,
        b"png" => ContentType::Png,
        b"jpg" | b"jpeg" => ContentType::Jpeg,
        b"gif" => ContentType::Gif,
        b"avif" => ContentType::Avif,
        b"ico" => ContentType::Icon,
        b"woff2" => ContentType::Woff2,
        b"woff" => ContentType::Woff,
        b"xml" => ContentType::Xml,
        b"wasm" => ContentType::Wasm,
        b"gz" => ContentType::Gzip,
        _ => ContentType::OctetStream,
    }
}

#[cfg(test)]
mod tests;
