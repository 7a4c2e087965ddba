// Package rowfill is the per-row stage of a flush after decoding: the values of the Kafka
// columns of one record (its headers as a map, its key in the configured table.key_format).
package rowfill
