//! The epoll floor: level-triggered epoll, a `read` and a `send` per readable connection.

use std::os::fd::{AsRawFd, OwnedFd};

use gnosis::sys::{self, Epoll, Events, READABLE};

use crate::Phase;

const LISTENER: u64 = u64::MAX;
/// What one read takes at most.
const READ_SIZE: usize = 64 * 1024;

struct Connection {
    socket: OwnedFd,
    phase: Phase,
}

pub fn serve(listener: OwnedFd) -> std::io::Result<()> {
    let epoll = Epoll::new()?;
    epoll.add(&listener, sys::ACCEPTABLE, LISTENER)?;
    let mut events = Events::with_capacity(256);
    // Indexed by descriptor: a closed connection's slot is the next one's.
    let mut connections: Vec<Option<Connection>> = Vec::new();
    let mut input = Vec::with_capacity(READ_SIZE);
    let mut output = Vec::with_capacity(READ_SIZE);
    loop {
        epoll.wait(&mut events, -1)?;
        for (token, _) in events.iter() {
            if token == LISTENER {
                while let Some((socket, _)) = sys::accept(&listener)? {
                    let fd = socket.as_raw_fd() as usize;
                    epoll.add(&socket, READABLE, fd as u64)?;
                    if connections.len() <= fd {
                        connections.resize_with(fd + 1, || None);
                    }
                    connections[fd] = Some(Connection {
                        socket,
                        phase: Phase::new(),
                    });
                }
                continue;
            }
            let slot = &mut connections[token as usize];
            let Some(connection) = slot else { continue };
            input.clear();
            let open = match sys::read_into(&connection.socket, &mut input, READ_SIZE) {
                Ok(0) | Err(_) => false,
                Ok(_) => {
                    output.clear();
                    let stays = connection.phase.on_input(&mut input, &mut output);
                    // The answers fit the socket's buffer: a floor's client reads them.
                    let sent = output.is_empty() || sys::send(&connection.socket, &output).is_ok();
                    sent && stays
                }
            };
            if !open {
                // Dropping the socket closes it and takes it out of the epoll set.
                *slot = None;
            }
        }
    }
}
