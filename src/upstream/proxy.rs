//! What the edge forwards through: the upstream, and the auth service that may stand
//! before it (`--auth`), as nginx's `auth_request` does. A request whose path needs
//! authorizing is written for the upstream at once and held; a sub-request asks the auth
//! service with the client's credentials (Authorization, Cookie) and what the request is
//! (X-Forwarded-Method, X-Forwarded-Uri). A 2xx lets it through with the fields the
//! service granted (X-User-Id, say) added; a 401 or 403 is the client's answer; anything
//! else, or no answer, is 503: never is a request passed on without the service's yes.
//! The fields it grants are only ever the service's: a client's own are dropped from every
//! request forwarded.

use std::time::Instant;

use super::{Address, Event, Failure, Link, Refused, Settings, Upstream};
use crate::h1::client::Forward;
use crate::http::{Origin, Request};

/// An auth service and what it guards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthSettings {
    pub address: Address,
    /// The target its sub-requests ask (`/_auth`).
    pub path: String,
    /// The paths that need its yes: those that begin with it (`/` for all).
    pub prefix: String,
    /// The fields of its 2xx answer passed on to the upstream.
    pub grants: Vec<String>,
}

/// Where the edge forwards: the upstream and how, and the auth service and how, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxySettings {
    pub address: Address,
    pub settings: Settings,
    pub auth: Option<(AuthSettings, Settings)>,
}

/// The edge's upstream, with the auth service before it if there is one. Its links are
/// the upstream's, then the auth service's.
pub struct Proxy {
    upstream: Upstream,
    auth: Option<Auth>,
    /// The auth service's fields passed on (none without one): a client's own are dropped.
    grants: Vec<String>,
}

/// The auth service, where it is asked and what it guards (its grants are the proxy's).
struct Auth {
    service: Upstream,
    path: String,
    prefix: String,
    held: Holding,
}

/// The requests waiting for the service's answer, by the token of their sub-request (a slot
/// each, reused), and the bytes they hold: at most the upstream's `queue_bytes`, past which
/// a request is refused as the upstream's full queue refuses it.
struct Holding {
    requests: Vec<Option<Held>>,
    free: Vec<usize>,
    bytes: usize,
    max_bytes: usize,
}

impl Holding {
    /// The slot `held` will take, if it may be held.
    fn slot(&mut self) -> Result<usize, Refused> {
        if self.bytes >= self.max_bytes {
            return Err(Refused::Busy);
        }
        Ok(self.free.pop().unwrap_or_else(|| {
            self.requests.push(None);
            self.requests.len() - 1
        }))
    }

    fn hold(&mut self, slot: usize, held: Held) {
        self.bytes += held.bytes.len();
        self.requests[slot] = Some(held);
    }

    fn release(&mut self, slot: usize) {
        self.free.push(slot);
    }

    fn take(&mut self, slot: u64) -> Option<Held> {
        let index = usize::try_from(slot).ok()?;
        let held = self.requests.get_mut(index)?.take()?;
        self.bytes -= held.bytes.len();
        self.free.push(index);
        Some(held)
    }
}

/// A request written for the upstream, waiting for the auth service's yes.
struct Held {
    token: u64,
    method: Vec<u8>,
    /// The request's bytes, and where the granted fields go (before the head's last CRLF).
    bytes: Vec<u8>,
    grants_at: usize,
}

impl Proxy {
    pub fn new(
        ProxySettings {
            address,
            settings,
            auth,
        }: ProxySettings,
    ) -> Proxy {
        Proxy {
            upstream: Upstream::new(address, settings),
            grants: auth
                .as_ref()
                .map_or(Vec::new(), |(auth, _)| auth.grants.clone()),
            auth: auth.map(|(auth, settings)| Auth {
                service: Upstream::new(auth.address, settings),
                path: auth.path,
                prefix: auth.prefix,
                held: Holding {
                    requests: Vec::new(),
                    free: Vec::new(),
                    bytes: 0,
                    max_bytes: settings.queue_bytes,
                },
            }),
        }
    }

    /// Forwards a client's `request`, whatever protocol carried it, from `origin`, its
    /// events to come with `token`: its fields as they came, but Host, which is its
    /// authority (HTTP/2's and HTTP/3's `:authority`, RFC 9113 8.3.1; HTTP/1.1's Host, or
    /// its absolute-form target's authority, RFC 9112 3.2.2); none for an HTTP/1.0 request
    /// without one, which cannot be forwarded. Through the auth service first if its path
    /// needs it.
    pub fn forward_request(
        &mut self,
        token: u64,
        request: &Request<'_>,
        origin: Origin,
        now: Instant,
    ) -> Result<(), Refused> {
        let forward = Forward {
            method: request.method_bytes,
            target: request.target.as_bytes(),
            version: request.version,
            client: origin.client,
            https: origin.https,
            body: request.body,
        };
        let authority =
            (!request.authority.is_empty()).then_some((&b"Host"[..], request.authority));
        let Proxy {
            upstream,
            auth,
            grants,
        } = self;
        let grants = &*grants;
        let fields = authority.into_iter().chain(
            request
                .field_lines
                .iter()
                .filter(move |(name, _)| authority.is_none() || !is_named(name, "host"))
                .filter(move |(name, _)| !grants.iter().any(|grant| is_named(name, grant))),
        );
        match auth {
            Some(auth) if request.path.starts_with(auth.prefix.as_str()) => {
                auth.ask(token, &forward, fields, now)
            }
            _ => upstream.forward(token, &forward, fields, now),
        }
    }

    /// How many links there are: the upstream's, then the auth service's.
    pub fn len(&self) -> usize {
        self.upstream.len() + self.auth.as_ref().map_or(0, |auth| auth.service.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn link(&self, index: usize) -> &Link {
        match index.checked_sub(self.upstream.len()) {
            None => self.upstream.link(index),
            Some(i) => self.auth.as_ref().expect("an auth link").service.link(i),
        }
    }

    /// For what does not deliver events: the read buffer, the bytes to send, the close.
    pub fn link_mut(&mut self, index: usize) -> &mut Link {
        match index.checked_sub(self.upstream.len()) {
            None => self.upstream.link_mut(index),
            Some(i) => self
                .auth
                .as_mut()
                .expect("an auth link")
                .service
                .link_mut(i),
        }
    }

    /// Runs `f` on link `index` with what its connection's events reach (see
    /// [`Upstream::on_link`]): the auth service's events become the upstream's requests,
    /// or their answers.
    pub fn on_link<T>(
        &mut self,
        index: usize,
        now: Instant,
        sink: Dyn<'_>,
        f: impl FnOnce(&mut Link, &mut super::Around<'_, Dyn<'_>>) -> T,
    ) -> T {
        let Some(i) = index.checked_sub(self.upstream.len()) else {
            return self.upstream.on_link(index, now, &mut { sink }, f);
        };
        let Proxy {
            upstream,
            auth,
            grants,
        } = self;
        let auth = auth.as_mut().expect("an auth link");
        let held = &mut auth.held;
        let mut answered = |slot: u64, event: Event<'_>| {
            let outcome = Auth::release(held, slot, event, grants, upstream, now);
            if let Some((token, failure)) = outcome {
                sink(token, Event::Failed(failure));
            }
        };
        let mut answered: Dyn<'_> = &mut answered;
        auth.service.on_link(i, now, &mut answered, f)
    }

    /// When [`Proxy::on_timers`] must run next.
    pub fn deadline(&self) -> Option<Instant> {
        let auth = self.auth.as_ref().and_then(|auth| auth.service.deadline());
        self.upstream.deadline().into_iter().chain(auth).min()
    }

    /// Fails what is past its deadline, in the upstream and at the auth service.
    pub fn on_timers(&mut self, now: Instant, sink: Dyn<'_>) {
        self.upstream.on_timers(now, &mut { &mut *sink });
        let Proxy {
            upstream,
            auth,
            grants,
        } = self;
        if let Some(auth) = auth {
            let held = &mut auth.held;
            auth.service.on_timers(now, &mut |slot, event: Event<'_>| {
                if let Some((token, failure)) =
                    Auth::release(held, slot, event, grants, upstream, now)
                {
                    sink(token, Event::Failed(failure));
                }
            });
        }
    }
}

/// A sink as the core hands it.
pub type Dyn<'s> = &'s mut dyn FnMut(u64, Event<'_>);

impl Auth {
    /// Writes `forward` for the upstream and holds it, and asks the service about it.
    fn ask<'f, F>(
        &mut self,
        token: u64,
        forward: &Forward<'f>,
        fields: F,
        now: Instant,
    ) -> Result<(), Refused>
    where
        F: Iterator<Item = (&'f [u8], &'f [u8])> + Clone,
    {
        let slot = self.held.slot()?;
        let mut held = Held {
            token,
            method: forward.method.to_vec(),
            bytes: Vec::new(),
            grants_at: 0,
        };
        let asked = forward
            .write(fields.clone(), &mut held.bytes)
            .map_err(Refused::Invalid)
            .and_then(|()| {
                // The head ends with CRLF CRLF, then the body.
                held.grants_at = held.bytes.len() - forward.body.len() - 2;
                let credentials = fields.filter(|(name, _)| {
                    ["host", "authorization", "cookie"]
                        .iter()
                        .any(|credential| is_named(name, credential))
                });
                let what = [
                    (&b"X-Forwarded-Method"[..], forward.method),
                    (b"X-Forwarded-Uri", forward.target),
                ];
                let sub_request = Forward {
                    method: b"GET",
                    target: self.path.as_bytes(),
                    body: &[],
                    ..*forward
                };
                let fields = credentials.chain(what);
                self.service.forward(slot as u64, &sub_request, fields, now)
            });
        match asked {
            Ok(()) => {
                self.held.hold(slot, held);
                Ok(())
            }
            Err(refused) => {
                self.held.release(slot);
                Err(match refused {
                    Refused::Invalid(error) => Refused::Invalid(error),
                    Refused::Unavailable | Refused::Busy => Refused::AuthUnavailable,
                    Refused::AuthUnavailable => refused,
                })
            }
        }
    }

    /// The service answered the sub-request `slot`: its request goes to the upstream, with
    /// the granted fields, or fails (the token and why).
    fn release(
        held: &mut Holding,
        slot: u64,
        event: Event<'_>,
        grants: &[String],
        upstream: &mut Upstream,
        now: Instant,
    ) -> Option<(u64, Failure)> {
        // Its body is not read (dropped with its pipe): only its head answers. What comes
        // after the head is not the request's, whose slot may be another's by then.
        if let Event::Moved { .. } = event {
            return None;
        }
        let request = held.take(slot)?;
        let Event::Response(response) = event else {
            return Some((request.token, Failure::AuthUnavailable));
        };
        match response.status {
            200..=299 => {}
            401 | 403 => return Some((request.token, Failure::Denied(response.status))),
            _ => return Some((request.token, Failure::AuthUnavailable)),
        }
        // Its values as the response's parser took them, checked again: written here, a CR
        // or LF would end the line.
        let granted = response.fields.iter().filter(|(name, value)| {
            grants.iter().any(|grant| is_named(name, grant))
                && !value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0))
        });
        let Held {
            token,
            method,
            bytes,
            grants_at,
        } = request;
        let write = |out: &mut Vec<u8>| {
            out.extend_from_slice(&bytes[..grants_at]);
            for (name, value) in granted {
                for part in [name, b": ", value, b"\r\n"] {
                    out.extend_from_slice(part);
                }
            }
            out.extend_from_slice(&bytes[grants_at..]);
            Ok(())
        };
        match upstream.place(token, &method, write, now) {
            Ok(()) => None,
            Err(Refused::Busy) => Some((token, Failure::Busy)),
            Err(_) => Some((token, Failure::Unavailable)),
        }
    }
}

/// Whether a field's `name` is `known`, whatever their case.
fn is_named(name: &[u8], known: &str) -> bool {
    name.eq_ignore_ascii_case(known.as_bytes())
}
