# Multi-stage build of kube-hpa-controller: a Rust builder, then a distroless non-root runtime.
FROM rust:1.95-bookworm AS build
# The build stamp (--version, kubernetes_build_info): .git is not copied (.dockerignore), so
# the commit and tree state come from here, e.g.
#   docker build --build-arg KUBE_HPA_GIT_COMMIT=$(git rev-parse HEAD) \
#     --build-arg KUBE_HPA_GIT_TREE_STATE=$(test -z "$(git status --porcelain)" && echo clean || echo dirty) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) .
# Unset, they are "unknown" and the build date is the time of the build.
ARG KUBE_HPA_GIT_COMMIT=""
ARG KUBE_HPA_GIT_TREE_STATE=""
ARG SOURCE_DATE_EPOCH=""
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p kube-hpa-controller \
 && cp target/release/kube-hpa-controller /kube-hpa-controller

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kube-hpa-controller /usr/local/bin/kube-hpa-controller
USER 65532:65532
EXPOSE 10257
ENTRYPOINT ["/usr/local/bin/kube-hpa-controller"]
