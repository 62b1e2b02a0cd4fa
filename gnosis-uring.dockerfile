# gnosis-uring: all seven TFB tests on io_uring (TFB runs the container privileged), PostgreSQL
# at tfb-database:5432.
FROM rust:1.95.0-slim-bookworm AS builder
WORKDIR /build
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY templates ./templates
ENV RUSTFLAGS="-C target-cpu=native"
RUN cargo build --release --locked --bin gnosis-uring

FROM debian:bookworm-slim
WORKDIR /app
COPY --from=builder /build/target/release/gnosis-uring /app/gnosis-uring
EXPOSE 8080
# One io_uring thread per core and two PostgreSQL connections per thread are the defaults.
CMD ["/app/gnosis-uring"]
