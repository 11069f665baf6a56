# Multi-stage build of kube-hpa-controller: a Rust builder, then a distroless non-root runtime.
#
#   docker build --build-arg KUBE_HPA_GIT_COMMIT=$(git rev-parse HEAD) -t REGISTRY/kube-hpa-controller:TAG .
#
# The build stage runs hack/release.sh: `cargo auditable` embeds the binary's dependency tree
# (readable by `cargo audit bin`, trivy, syft, grype from the image alone) and `cargo cyclonedx`
# writes its CycloneDX SBOM, shipped in the image at /usr/share/doc/kube-hpa-controller/ and
# attachable to the pushed image as an attestation (README "Sign the image").
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
# hack/release.sh installs cargo-auditable and cargo-cyclonedx under KUBE_HPA_CACHE.
ENV KUBE_HPA_CACHE=/cache \
    CARGO_TARGET_DIR=/src/target
WORKDIR /src
COPY . .
RUN hack/release.sh --profile release /out

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/kube-hpa-controller /usr/local/bin/kube-hpa-controller
COPY --from=build /out/kube-hpa-controller.cdx.json /usr/share/doc/kube-hpa-controller/kube-hpa-controller.cdx.json
COPY --from=build /src/LICENSE /usr/share/doc/kube-hpa-controller/LICENSE
# distroless's nonroot user; the Deployment and the chart also set runAsNonRoot.
USER 65532:65532
EXPOSE 10257
ENTRYPOINT ["/usr/local/bin/kube-hpa-controller"]
