# gnosis: all seven TFB tests (epoll server, PostgreSQL at tfb-database:5432).
FROM rust:1.95.0-slim-bookworm AS builder
WORKDIR /build
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY templates ./templates
ENV RUSTFLAGS="-C target-cpu=native"
RUN cargo build --release --locked --bin gnosis

FROM debian:bookworm-slim
WORKDIR /app
COPY --from=builder /build/target/release/gnosis /app/gnosis
EXPOSE 8080
# One thread per core and two PostgreSQL connections per thread are the defaults; with no PG*
# variable and no local socket the database is tfb-database:5432 as benchmarkdbuser.
CMD ["/app/gnosis"]
