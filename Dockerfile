# Multi-stage build of kube-hpa-controller: a Rust builder, then a distroless non-root runtime.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p kube-hpa-controller \
 && cp target/release/kube-hpa-controller /kube-hpa-controller

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kube-hpa-controller /usr/local/bin/kube-hpa-controller
USER 65532:65532
EXPOSE 10257
ENTRYPOINT ["/usr/local/bin/kube-hpa-controller"]
