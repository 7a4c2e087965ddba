# ingestd container: one static binary plus the example pipeline files.
# docker build -t ingestd . && docker run -v $PWD/configs:/etc/ingestd ingestd
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ingestd ./cmd/ingestd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ingestd /usr/local/bin/ingestd
COPY configs/ /etc/ingestd/
VOLUME /var/lib/ingestd
EXPOSE 9102
ENTRYPOINT ["/usr/local/bin/ingestd"]
CMD ["run", "--config", "/etc/ingestd", "--listen", "0.0.0.0:9102"]
