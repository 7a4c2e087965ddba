// Package integration holds end-to-end tests of ingestd against a real Apache Kafka broker
// and a real Confluent-compatible schema registry (started by scripts/stack.sh), with the
// data produced by confluent-kafka's AvroSerializer and the tables read back by delta-rs
// (both from the project's Python venv, scripts/venv.sh). `make test` starts all of them.
//
// Without the stack the tests skip locally, naming what is missing; with CI=true they fail.
package integration
