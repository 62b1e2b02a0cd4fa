//! The no-parse floor (issues #28 and #44): a server per core that answers every request
//! with the same bytes without parsing it. What it spends per request is the kernel's part
//! of serving HTTP/1.1 on this machine (accept, read, send, close, and epoll's or
//! io_uring's own cost), the least any server pays, so a competitor's CPU per request over
//! the floor's bounds what any server could win on it. Two backends, as gnosis has:
//!
//! - `epoll.rs` (the default): epoll, `read` and `send`, as `gnosis` moves bytes.
//! - `uring.rs` (`--uring`): the rings gnosis-uring sets up (`SINGLE_ISSUER |
//!   DEFER_TASKRUN`), a multishot accept into the ring's file table, a multishot receive
//!   per connection into provided buffers, sends queued from the completion loop and
//!   submitted by the next wait, and nothing else; its flags turn on one io_uring lever
//!   each, measured here first, where noise is smallest (`uring.rs` lists them).
//!
//! Two more levers for both (`steer.rs`): `--steer` keeps worker i on the i-th CPU and
//! prefers its listener for the connections whose packets that CPU processes
//! (`SO_INCOMING_CPU`), as vortex does with a program that routes by CPU; `--defer-accept`
//! wakes an accept only once the client's first data are in (`TCP_DEFER_ACCEPT`).
//!
//! docs/BENCHMARKS.md ("The no-parse floor") has the commands and the numbers:
//!
//! ```sh
//! cargo build --release --example floor
//! scripts/tool bench --server "target/release/examples/floor --port {port}" --name floor ...
//! scripts/tool bench --server "target/release/examples/floor --uring --port {port}" ...
//! ```
//!
//! A request ends at its empty line (`\r\n\r\n`), except the empty line after a chunked
//! body's last chunk (`\n0\r\n\r\n`), so pipelined requests and the bodies of HttpArena's
//! baseline mix are counted right without a parser. A request that says `Connection: close`
//! is answered, then its connection closed. A `GET /ws` is switched to WebSocket with gnosis's
//! `101`, and every frame then echoed with its opcode, unmasked, the echoes of a read in one
//! send: the least an echo server does (HttpArena's WebSocket profiles). Not for the network:
//! it trusts its client.

mod epoll;
mod steer;
mod uring;

use gnosis::h1::Framing;
use gnosis::http::{Answer, HttpDate, Upgrade, Version};
use gnosis::sys;
use gnosis::ws::frame::{self, Decoded};
use gnosis::ws::{handshake, Opcode, MAX_MESSAGE};
use memchr::memmem;

/// The answer to every request: HttpArena's baseline answer, gnosis's headers.
const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Thu, 26 Nov 2026 09:00:00 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n55";
const EMPTY_LINE: &[u8] = b"\r\n\r\n";

const USAGE: &str = "usage: floor [--port PORT] [--threads N] [--steer] [--defer-accept] \
[--uring [LEVER...]] (levers: uring.rs's Levers::parse)";

fn main() -> std::io::Result<()> {
    let (mut port, mut threads, mut levers) = (
        8080,
        std::thread::available_parallelism().map_or(1, usize::from),
        None,
    );
    let (mut steered, mut defer_accept) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{flag} takes a value; {USAGE}"))
        };
        match flag.as_str() {
            "--port" => port = value().parse().expect("--port takes a port"),
            "--threads" => threads = value().parse().expect("--threads takes a count"),
            "--uring" => levers = Some(uring::Levers::default()),
            "--steer" => steered = true,
            "--defer-accept" => defer_accept = true,
            lever => match &mut levers {
                Some(levers) => levers.parse(lever, value),
                None => panic!("{USAGE}"),
            },
        }
    }
    sys::raise_open_files_limit()?;
    let cpus = steer::allowed_cpus()?;
    let listeners = (0..threads)
        .map(|_| sys::reuseport_listener(port))
        .collect::<std::io::Result<Vec<_>>>()?;
    if defer_accept {
        for listener in &listeners {
            steer::defer_accept(listener, 1)?;
        }
    }
    // Worker i on the i-th CPU, and each connection to the worker of the CPU that took it.
    let steered = steered && cpus.len() >= threads;
    if steered {
        for (listener, &cpu) in listeners.iter().zip(&cpus) {
            steer::prefer_cpu(listener, cpu)?;
        }
    }
    let workers: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let cpu = cpus.get(i).copied().filter(|_| steered);
            std::thread::spawn(move || {
                if let Some(cpu) = cpu {
                    steer::pin_to_cpu(cpu)?;
                }
                match levers {
                    Some(levers) => uring::serve(listener, levers),
                    None => epoll::serve(listener),
                }
            })
        })
        .collect();
    let backend = match levers {
        Some(levers) => format!("io_uring ({levers:?})"),
        None => "epoll".to_string(),
    };
    eprintln!(
        "floor: serving on 0.0.0.0:{port} with {threads} threads, {backend}, \
         steered by CPU: {steered}, deferred accepts: {defer_accept}"
    );
    for worker in workers {
        worker.join().expect("a worker panicked")?;
    }
    Ok(())
}

/// What a connection speaks.
enum Phase {
    /// HTTP/1.1 requests, answered as they end.
    Http(RequestEnds),
    /// Upgraded: WebSocket frames, with the bytes of one not all read yet.
    WebSocket(Vec<u8>),
}

impl Phase {
    fn new() -> Phase {
        Phase::Http(RequestEnds::default())
    }

    /// Appends to `output` the answers to what `input` completes; false once the connection
    /// is to close after them.
    fn on_input(&mut self, input: &mut Vec<u8>, output: &mut Vec<u8>) -> bool {
        match self {
            Phase::WebSocket(pending) => echo(pending, input, output),
            Phase::Http(_) if input.starts_with(b"GET /ws ") => {
                *self = Phase::WebSocket(Vec::new());
                switch(input, output)
            }
            Phase::Http(ends) => {
                for _ in 0..ends.count(input) {
                    output.extend_from_slice(ANSWER);
                }
                memmem::find(input, b"Connection: close").is_none()
            }
        }
    }
}

/// The `101` to a `GET /ws`, as gnosis writes it, for the request's key; false without one.
fn switch(request: &[u8], out: &mut Vec<u8>) -> bool {
    const KEY: &[u8] = b"Sec-WebSocket-Key:";
    let Some(at) = memmem::find(request, KEY) else {
        return false;
    };
    let value = &request[at + KEY.len()..];
    let end = memmem::find(value, b"\r\n").unwrap_or(value.len());
    let upgrade = Upgrade {
        connection_upgrade: true,
        websocket: true,
        key: Some(value[..end].trim_ascii()),
        version: Some(b"13"),
    };
    let Ok(accept) = handshake::check(&upgrade, Version::Http11) else {
        return false;
    };
    // A 101 says nothing of the connection's framing, and carries no date.
    let answer = Answer::switch_to_websocket(&accept);
    Framing::closing().write(out, &HttpDate::new(), &answer);
    true
}

/// Echoes every whole frame of `pending` and `input` with its opcode, unmasked (gnosis's
/// frame code, without a session's checks); keeps the rest. False after a close or a bad frame.
fn echo(pending: &mut Vec<u8>, input: &mut Vec<u8>, out: &mut Vec<u8>) -> bool {
    if !pending.is_empty() {
        pending.extend_from_slice(input);
        std::mem::swap(pending, input);
        pending.clear();
    }
    let mut at = 0;
    let open = loop {
        let header = match frame::decode(&input[at..], MAX_MESSAGE) {
            Decoded::Frame(header) => header,
            Decoded::Partial => break true,
            Decoded::Invalid(_) => break false,
        };
        let end = at + header.len + header.payload_len;
        let Some(payload) = input.get_mut(at + header.len..end) else {
            break true;
        };
        frame::unmask(payload, header.mask);
        frame::write(out, header.opcode, payload);
        at = end;
        if header.opcode == Opcode::Close {
            break false;
        }
    };
    pending.extend_from_slice(&input[at..]);
    open
}

/// The last bytes a connection sent, to find the end of a request across reads.
#[derive(Default)]
struct RequestEnds {
    tail: [u8; 5],
}

impl RequestEnds {
    /// How many requests end in `input`, which follows the bytes already read.
    fn count(&mut self, input: &[u8]) -> usize {
        // The last bytes read before `input`, then its first bytes: an empty line may straddle.
        let mut seam = [0; 10];
        let head = input.len().min(5);
        seam[..5].copy_from_slice(&self.tail);
        seam[5..5 + head].copy_from_slice(&input[..head]);
        let seam = &seam[..5 + head];
        let straddling = memmem::find_iter(seam, EMPTY_LINE).filter(|&at| at < 5 && at + 4 > 5);
        let inside = memmem::find_iter(input, EMPTY_LINE).map(|at| at + 5);
        let ends = straddling.chain(inside).filter(|&at| {
            // The two bytes before it, from the seam or the input, say whether a chunked body ends.
            let before = |back: usize| match at.checked_sub(back) {
                Some(i) if i >= 5 => input[i - 5],
                Some(i) => self.tail[i],
                None => 0,
            };
            (before(2), before(1)) != (b'\n', b'0')
        });
        let count = ends.count();
        let keep = input.len().min(5);
        self.tail.rotate_left(keep);
        self.tail[5 - keep..].copy_from_slice(&input[input.len() - keep..]);
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HttpArena's baseline mix, a GET and two POSTs (one chunked), three times: nine requests.
    const MIX: &[u8] = b"GET /baseline11?a=1&b=2 HTTP/1.1\r\nHost: h\r\n\r\n\
POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\n\r\n20\
POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n20\r\n0\r\n\r\n";

    /// A client's frame: FIN, `opcode`, masked with `mask`.
    fn client_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
        frame
    }

    #[test]
    fn frames_are_echoed_unmasked_in_order_whatever_reads_they_come_in() {
        let text = client_frame(0x1, b"hello", [1, 2, 3, 4]);
        let binary = client_frame(0x2, &[7; 100], [9, 8, 7, 6]);
        let close = client_frame(0x8, &1000u16.to_be_bytes(), [5, 5, 5, 5]);
        let input = [&text[..], &binary, &text, &close].concat();
        let mut expected = Vec::new();
        frame::write(&mut expected, Opcode::Text, b"hello");
        frame::write(&mut expected, Opcode::Binary, &[7; 100]);
        frame::write(&mut expected, Opcode::Text, b"hello");
        frame::write(&mut expected, Opcode::Close, &1000u16.to_be_bytes());
        for step in 1..=input.len() {
            let (mut pending, mut out, mut open) = (Vec::new(), Vec::new(), true);
            for read in input.chunks(step) {
                assert!(open, "reads of {step} bytes: closed before the close frame");
                open = echo(&mut pending, &mut read.to_vec(), &mut out);
            }
            assert!(
                !open,
                "reads of {step} bytes: still open after the close frame"
            );
            assert_eq!(out, expected, "reads of {step} bytes");
        }
    }

    #[test]
    fn requests_are_counted_whatever_reads_the_bytes_come_in() {
        let input = MIX.repeat(3);
        for step in 1..=input.len() {
            let mut ends = RequestEnds::default();
            let counted: usize = input.chunks(step).map(|read| ends.count(read)).sum();
            assert_eq!(counted, 9, "reads of {step} bytes");
        }
    }

    /// A floor (epoll, or io_uring with `levers`) on a free port, serving from a thread of
    /// its own.
    fn start(levers: Option<uring::Levers>) -> u16 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|probe| probe.local_addr())
            .expect("a free port")
            .port();
        let listener = sys::reuseport_listener(port).expect("listening");
        std::thread::spawn(move || match levers {
            Some(levers) => uring::serve(listener, levers),
            None => epoll::serve(listener),
        });
        port
    }

    #[test]
    fn every_backend_and_lever_answers_each_request_then_closes() {
        use std::io::{Read, Write};
        let mut setups = vec![("epoll", None)];
        for flags in [
            &[][..],
            &["--oneshot"],
            &["--poll-first"],
            &["--bundle"],
            &["--incremental"],
            &["--fixed-send"],
            &["--coop"],
        ] {
            let mut levers = uring::Levers::default();
            for flag in flags {
                levers.parse(flag, || unreachable!());
            }
            setups.push(("io_uring", Some(levers)));
        }
        for (backend, levers) in setups {
            let port = start(levers);
            let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            // 5,000 requests (more than a 4 KiB buffer holds), sent in pieces that split
            // requests anywhere, then one that closes.
            let requests = MIX.repeat(5_000 / 3 + 1);
            for piece in requests.chunks(1_000) {
                client.write_all(piece).expect("send");
            }
            client
                .write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                .expect("send");
            let mut answers = Vec::new();
            client.read_to_end(&mut answers).expect("read until closed");
            let expected = (requests_in(&requests) + 1) * ANSWER.len();
            assert_eq!(answers.len(), expected, "{backend} {levers:?}");
            assert!(
                answers.chunks(ANSWER.len()).all(|a| a == ANSWER),
                "{backend} {levers:?}"
            );
        }
    }

    fn requests_in(bytes: &[u8]) -> usize {
        RequestEnds::default().count(bytes)
    }
}
