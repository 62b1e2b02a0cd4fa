//! The upgrade: RFC 6455's handshake on `GET /ws`, the refusals, and the answers to
//! requests pipelined before it.

use super::common::{get_request, Server};
use super::{masked, upgrade_request, Raw, ACCEPT, KEY};

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, value) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

fn answers_101_with_the_accept_value_and_no_extension(binary: &str) {
    let server = Server::start(binary, &[]);
    // Offered an extension and a subprotocol, it negotiates neither.
    let offer = "Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Protocol: chat\r\n";
    let (_raw, head) = Raw::request(server.port, upgrade_request(offer).as_bytes());
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert_eq!(header(&head, "sec-websocket-accept"), Some(ACCEPT));
    assert_eq!(header(&head, "upgrade"), Some("websocket"));
    assert_eq!(header(&head, "connection"), Some("Upgrade"));
    assert_eq!(header(&head, "sec-websocket-extensions"), None);
    assert_eq!(header(&head, "sec-websocket-protocol"), None);
}

fn refuses_what_is_not_a_valid_handshake(binary: &str) {
    let server = Server::start(binary, &[]);
    // A plain GET: 426 naming websocket, and the connection goes on.
    let mut raw = Raw::connect(server.port);
    raw.send(get_request("/ws").as_bytes());
    let (head, _) = raw.response();
    assert!(head.starts_with("HTTP/1.1 426 "), "{head}");
    assert_eq!(header(&head, "upgrade"), Some("websocket"));
    raw.send(get_request("/plaintext").as_bytes());
    assert_eq!(raw.response().1, b"Hello, World!");
    let good = upgrade_request("");
    let cases = [
        (good.replace("Version: 13", "Version: 8"), "426"),
        (good.replace(KEY, "dG9vIHNob3J0"), "400"),
        (good.replace(KEY, "not base64 at all!!!!!!="), "400"),
        (
            good.replace("Connection: Upgrade", "Connection: keep-alive"),
            "400",
        ),
        (good.replace("HTTP/1.1", "HTTP/1.0"), "400"),
        (good.replace("GET", "HEAD"), "400"),
        (good.replace("GET", "POST"), "405"),
    ];
    for (request, status) in cases {
        let (_raw, head) = Raw::request(server.port, request.as_bytes());
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status} ")),
            "{request}\n{head}"
        );
        if status == "426" {
            assert_eq!(header(&head, "sec-websocket-version"), Some("13"), "{head}");
        }
    }
}

/// Requests pipelined before the upgrade are answered first, in order (one of them by a
/// timer); a frame sent in the same write as the handshake is the session's first.
fn answers_pipelined_requests_first_and_takes_the_bytes_after_the_handshake(binary: &str) {
    let server = Server::start(binary, &[]);
    let stream = [
        get_request("/delay/30").into_bytes(),
        get_request("/plaintext").into_bytes(),
        upgrade_request("").into_bytes(),
        masked(0x81, b"first"),
    ]
    .concat();
    let mut raw = Raw::connect(server.port);
    raw.send(&stream);
    assert_eq!(raw.response().1, b"30");
    assert_eq!(raw.response().1, b"Hello, World!");
    assert!(raw.head().starts_with("HTTP/1.1 101 "));
    assert_eq!(raw.frame().unwrap(), (0x81, b"first".to_vec()));
    raw.send(&masked(0x88, &1000u16.to_be_bytes()));
    assert_eq!(raw.close_code(), 1000);
}

test_both_binaries!(gnosis, gnosis_uring;
    answers_101_with_the_accept_value_and_no_extension,
    refuses_what_is_not_a_valid_handshake,
    answers_pipelined_requests_first_and_takes_the_bytes_after_the_handshake,
);
