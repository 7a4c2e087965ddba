// Package kafkaclient builds ingestd's Kafka clients and their security.
//
// SecurityOpts turns a pipeline's kafka block (config.Kafka) into franz-go options: the
// client id, TLS, and a SASL mechanism (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER,
// AWS_MSK_IAM) whose credential callback re-reads the password or token on every
// authentication and KIP-368 re-authentication, so that a rotated secret is used without
// a restart. New returns the factory of one pipeline's clients (Clients): the group
// consumer, the dead-letter producer, the replay's reader and carry-forward producer, the
// `dlq inspect` reader and the log cleanup's admin client, each with its role as the
// client label of its logs and metrics.
//
// AsSecurityError tells a permanent security failure (authentication, authorization,
// TLS, an unreadable secret) from a transient one and names the principal, the missing
// ACL and the kafka-acls.sh command that grants it (MissingACL): docs/security.md,
// "ACLs and registry permissions". Metrics counts the credential reads and the
// re-authentications.
//
// The package imports ingest/config, franz-go, prometheus and internal/awscred; never
// the pipeline trunk (ingest) nor the Delta writer (docs/architecture.md, "Packages and
// import rules").
//
// # Concurrency
//
// The package starts no goroutines. The SASL credential callbacks and the
// re-authentication hook run on franz-go's connection goroutines, several at a time:
// the password and token callbacks share nothing but the Metrics counters, and the
// AWS_MSK_IAM credentials and the hook's per-broker counts are each guarded by a mutex
// of their own. Clients' constructors and SecurityOpts may be called from any goroutine;
// each client they return is owned, and closed, by its caller.
package kafkaclient
