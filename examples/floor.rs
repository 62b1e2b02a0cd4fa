//! The no-parse floor (issue #28): an epoll server per core that answers every request with
//! the same bytes without parsing it. What it spends per request is the kernel's part of
//! serving HTTP/1.1 on this machine (accept, read, send, close, epoll), the least any server
//! pays, so a competitor's CPU per request over the floor's bounds what any server could win
//! on it. docs/BENCHMARKS.md ("The no-parse floor") has the command and the numbers:
//!
//! ```sh
//! cargo build --release --example floor
//! scripts/tool bench --server "target/release/examples/floor --port {port}" --name floor ...
//! ```
//!
//! A request ends at its empty line (`\r\n\r\n`), except the empty line after a chunked
//! body's last chunk (`\n0\r\n\r\n`), so pipelined requests and the bodies of HttpArena's
//! baseline mix are counted right without a parser. A request that says `Connection: close`
//! is answered, then its connection closed. Not for the network: it trusts its client.

use gnosis::sys::{self, Epoll, Events, READABLE};
use memchr::memmem;
use std::os::fd::{AsRawFd, OwnedFd};

/// The answer to every request: HttpArena's baseline answer, gnosis's headers.
const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Thu, 26 Nov 2026 09:00:00 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n55";
const LISTENER: u64 = u64::MAX;
const EMPTY_LINE: &[u8] = b"\r\n\r\n";

fn main() -> std::io::Result<()> {
    let (mut port, mut threads) = (
        8080,
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        match pair {
            [flag, value] if flag == "--port" => port = value.parse().expect("--port takes a port"),
            [flag, value] if flag == "--threads" => {
                threads = value.parse().expect("--threads takes a count")
            }
            _ => panic!("usage: floor [--port PORT] [--threads N]"),
        }
    }
    sys::raise_open_files_limit()?;
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let listener = sys::reuseport_listener(port)?;
            Ok(std::thread::spawn(move || serve(listener)))
        })
        .collect::<std::io::Result<_>>()?;
    eprintln!("floor: serving on 0.0.0.0:{port} with {threads} threads");
    for worker in workers {
        worker.join().expect("a worker panicked")?;
    }
    Ok(())
}

struct Connection {
    socket: OwnedFd,
    ends: RequestEnds,
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

fn serve(listener: OwnedFd) -> std::io::Result<()> {
    let epoll = Epoll::new()?;
    epoll.add(&listener, sys::ACCEPTABLE, LISTENER)?;
    let mut events = Events::with_capacity(256);
    // Indexed by descriptor: a closed connection's slot is the next one's.
    let mut connections: Vec<Option<Connection>> = Vec::new();
    let mut input = Vec::with_capacity(64 * 1024);
    let mut output = Vec::with_capacity(64 * 1024);
    loop {
        epoll.wait(&mut events, -1)?;
        for (token, _) in events.iter() {
            if token == LISTENER {
                while let Some(socket) = sys::accept(&listener)? {
                    let fd = socket.as_raw_fd() as usize;
                    epoll.add(&socket, READABLE, fd as u64)?;
                    if connections.len() <= fd {
                        connections.resize_with(fd + 1, || None);
                    }
                    connections[fd] = Some(Connection {
                        socket,
                        ends: RequestEnds::default(),
                    });
                }
                continue;
            }
            let slot = &mut connections[token as usize];
            let Some(connection) = slot else { continue };
            input.clear();
            let open = match sys::read_into(&connection.socket, &mut input, 64 * 1024) {
                Ok(0) | Err(_) => false,
                Ok(_) => {
                    output.clear();
                    for _ in 0..connection.ends.count(&input) {
                        output.extend_from_slice(ANSWER);
                    }
                    // The answers fit the socket's buffer: a floor's client reads them.
                    let sent = output.is_empty() || sys::send(&connection.socket, &output).is_ok();
                    sent && memmem::find(&input, b"Connection: close").is_none()
                }
            };
            if !open {
                // Dropping the socket closes it and takes it out of the epoll set.
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HttpArena's baseline mix, a GET and two POSTs (one chunked), three times: nine requests.
    const MIX: &[u8] = b"GET /baseline11?a=1&b=2 HTTP/1.1\r\nHost: h\r\n\r\n\
POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\n\r\n20\
POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n20\r\n0\r\n\r\n";

    #[test]
    fn requests_are_counted_whatever_reads_the_bytes_come_in() {
        let input = MIX.repeat(3);
        for step in 1..=input.len() {
            let mut ends = RequestEnds::default();
            let counted: usize = input.chunks(step).map(|read| ends.count(read)).sum();
            assert_eq!(counted, 9, "reads of {step} bytes");
        }
    }
}
