//! The TFB application: routes and handlers.

use serde::Serialize;

use crate::http::{ContentType, HttpDate, Method, Request, Response, Status};
use crate::server::Handler;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Plaintext,
    Json,
}

impl Route {
    pub fn find(path: &str) -> Option<Route> {
        match path {
            "/plaintext" => Some(Route::Plaintext),
            "/json" => Some(Route::Json),
            _ => None,
        }
    }
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// One worker thread's application state.
#[derive(Default)]
pub struct App {
    /// Reused for serializing bodies.
    body: Vec<u8>,
}

impl App {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Handler for App {
    fn handle(
        &mut self,
        request: &Request<'_>,
        response: Response,
        out: &mut Vec<u8>,
        date: &HttpDate,
    ) {
        let Some(route) = Route::find(request.path) else {
            return response.write_error(out, date, Status::NotFound);
        };
        if request.method == Method::Other {
            return response.write_error(out, date, Status::MethodNotAllowed);
        }
        match route {
            Route::Plaintext => {
                response.write(out, date, Status::Ok, ContentType::Plain, b"Hello, World!")
            }
            Route::Json => {
                self.body.clear();
                let message = Message {
                    message: "Hello, World!",
                };
                // Writing a plain struct into a Vec cannot fail.
                serde_json::to_writer(&mut self.body, &message).expect("serializing into memory");
                response.write(out, date, Status::Ok, ContentType::Json, &self.body);
            }
        }
    }
}
