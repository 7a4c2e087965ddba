// Package config loads pipeline files: one YAML file per pipeline into a validated
// Config, every problem reported at once with its file, line and fix.
//
// Load reads a file or every *.yaml / *.yml file of a directory, expands ${VAR} and
// ${VAR:-default} from the environment (a value is taken as written, never re-parsed as
// YAML), rejects unknown keys (suggesting the closest known one), applies the defaults and
// validates each file and the files together (unique names; no two pipelines writing one
// topic into one table). Secrets (passwords, tokens) are held in Secret, which every
// printer redacts; files and environment variables named for them are read at start-up to
// check them and again on each use, so a rotated secret is picked up without a restart.
//
// Every key, its type, default and allowed values are listed in docs/configuration.md; a
// test walks the Config types and fails on a key that page lacks or a key it lists that
// Load does not know.
//
// The package builds no Kafka client (it does not import franz-go): the pipeline turns a
// Config into clients, stores and tables.
package config
