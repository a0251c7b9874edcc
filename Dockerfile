# Static binaries for every quorum role in one minimal, non-root image.
# Build: docker build --build-arg VERSION=$(git describe --tags --always) -t quorum:dev .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOFLAGS=-trimpath go build \
      -ldflags "-s -w -X github.com/quorumsql/quorum/internal/version.Version=${VERSION}" \
      -o /out/ ./cmd/quorum ./cmd/coordinator ./cmd/generator-worker ./cmd/explorer-worker ./cmd/voter

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="quorum" \
      org.opencontainers.image.description="Distributed Text-to-SQL agent runner" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/ /usr/local/bin/
# The demo dataset, so a fresh cluster can run something at once.
COPY --from=build /src/examples/demo /data/demo
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/quorum"]
CMD ["--help"]
