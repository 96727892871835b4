//! The callback API of the paper's Listing 1 (SPEC M1): how an application hands its
//! request processing to Mangosteen without being restructured around persistence.
//!
//! Listing 1's callbacks map onto [`Application`] one to one: `initClient`/`destroyClient`
//! ([`Application::init_client`], [`Application::destroy_client`]), `deserializeRequest`
//! ([`Application::deserialize`]), `isReadOnly` ([`Application::is_read_only`]),
//! `processRequest` and `getResponse` ([`Application::process_read`] and
//! [`Application::process_write`], which return the serialized response). The
//! application's state is the durable region: read-only requests see it as `&[u8]`, in
//! parallel; read-write requests get a [`Tx`] and are flat-combined into batches whose
//! writes are captured (explicitly, or by page protection with `Capture::Pages`).
//!
//! [`Frontend`] is local mode (the application calls it directly); [`crate::rpc`] serves
//! the same frontend to clients over a socket.

use crate::error::Result;
use crate::runtime::Mangosteen;
use crate::tx::Tx;

/// An application made durable by Mangosteen (Listing 1).
pub trait Application: Send + Sync + 'static {
    /// Per-client state (a connection's context).
    type Client: Send;
    /// A deserialized request.
    type Request: Send + Sync;

    /// A new client connected.
    fn init_client(&self) -> Self::Client;
    /// A client went away.
    fn destroy_client(&self, client: Self::Client) {
        drop(client);
    }
    /// Parse a request's bytes; an error is answered as it is, without running anything.
    fn deserialize(&self, client: &mut Self::Client, bytes: &[u8]) -> std::result::Result<Self::Request, String>;
    /// Whether `req` only reads the state (then it runs in parallel with other reads).
    fn is_read_only(&self, req: &Self::Request) -> bool;
    /// Run a read-only request; returns the response.
    fn process_read(&self, state: &[u8], req: &Self::Request) -> Vec<u8>;
    /// Run a read-write request inside a batch; returns the response, which is sent only
    /// once the batch is durable.
    fn process_write(&self, tx: &mut Tx<'_>, req: &Self::Request) -> Vec<u8>;
}

/// Local mode: an application and its durable state.
pub struct Frontend<A: Application> {
    app: A,
    m: Mangosteen,
}

impl<A: Application> Frontend<A> {
    pub fn new(app: A, m: Mangosteen) -> Frontend<A> {
        Frontend { app, m }
    }

    /// The application.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The runtime.
    pub fn runtime(&self) -> &Mangosteen {
        &self.m
    }

    /// Handle one request of `client` (Fig. 1's `clientCmd`): deserialize, then run it as
    /// a read or in a batch; the response of a write is returned once it is durable.
    pub fn handle(&self, client: &mut A::Client, bytes: &[u8]) -> Result<std::result::Result<Vec<u8>, String>> {
        let req = match self.app.deserialize(client, bytes) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        if self.app.is_read_only(&req) {
            return Ok(Ok(self.m.read(|s| self.app.process_read(s, &req))));
        }
        let app = &self.app;
        let req = &req;
        loop {
            // Rolled back because another request of its batch aborted: nothing of it was
            // applied, so it runs again.
            match self.m.batch(move |tx| app.process_write(tx, req)) {
                Err(crate::Error::RolledBack) => continue,
                r => return Ok(Ok(r?)),
            }
        }
    }
}
