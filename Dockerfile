# ingestd container: one static binary plus the example pipeline files.
# The pipeline files take the brokers and the registry from the environment; their
# defaults are 127.0.0.1, which inside a container is the container itself. Say where
# they are (here the compose project's network and names, see docker-compose.yml):
#   docker build -t ingestd . && docker run --network ingestd_default \
#     -e KAFKA_BROKERS=kafka:19092 -e SCHEMA_REGISTRY_URL=http://registry:8080/apis/ccompat/v7 \
#     -v $PWD/configs:/etc/ingestd:ro ingestd
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ingestd ./cmd/ingestd
# The data directory, made here because distroless has no shell (copied below).
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ingestd /usr/local/bin/ingestd
COPY configs/ /etc/ingestd/
# /var/lib/ingestd belongs to the user ingestd runs as (distroless nonroot, 65532:65532):
# a new named volume mounted there is initialised from this directory, owner and mode
# included, so ingestd can write its tables. Without it the volume would come up owned by
# root and every table write would fail. It must come before VOLUME (the legacy builder
# discards changes to a volume path made after it). A bind mount or an existing volume
# keeps its own owner: chown it to 65532:65532 (cmd/ingestd/image_test.go checks this file).
COPY --from=build --chown=65532:65532 /out/data /var/lib/ingestd
USER 65532:65532
VOLUME /var/lib/ingestd
EXPOSE 9102
ENTRYPOINT ["/usr/local/bin/ingestd"]
CMD ["run", "--config", "/etc/ingestd", "--listen", "0.0.0.0:9102"]
