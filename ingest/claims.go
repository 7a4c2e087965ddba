package ingest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
)

// ErrTableClaimed is returned (wrapped) by TableClaims.Claim when another pipeline of
// the process already writes one of the pipeline's topics into its table.
var ErrTableClaimed = errors.New("topic already written into this table by another pipeline")

// TableClaims records, for one process (one `ingestd run`), which pipeline writes each
// topic into each table, so that a topic is never written into one table by two
// pipelines. Two pipelines with their own consumer groups and txn app ids would each
// write every record of the topic: config.Load refuses what the files show, but two
// different kafka.topic_pattern values that both match one topic and render one
// table.uri are only known once the topics are listed. Tables are compared by
// storage.CanonicalURI (a trailing slash, file:// or a plain path are one table).
// Different topics into one table (docs/tables.md, "Two topics, one table") are no
// conflict. Safe for concurrent use; the zero value is not: use NewTableClaims.
type TableClaims struct {
	mu     sync.Mutex
	owners map[tableTopic]claimant
}

// tableTopic is one topic written into one table (its canonical URI).
type tableTopic struct{ table, topic string }

// claimant is the pipeline that claimed a tableTopic.
type claimant struct{ pipeline, file string }

// NewTableClaims returns an empty record.
func NewTableClaims() *TableClaims {
	return &TableClaims{owners: map[tableTopic]claimant{}}
}

// Claim records that the pipeline of cfg (cfg.Name, from cfg.File) writes each of
// cfg.Kafka.Topics into cfg.Table.URI; call it before the pipeline opens its table.
// release gives the claims back (a pipeline that failed to open). A nil TableClaims
// claims nothing.
//
// Errors: ErrTableClaimed, wrapped in a message naming the table, the topic, both
// pipelines and their files, when another pipeline claimed one of the topics for this
// table; nothing is claimed then.
func (c *TableClaims) Claim(cfg *config.Config) (release func(), err error) {
	if c == nil {
		return func() {}, nil
	}
	me := claimant{pipeline: cfg.Name, file: cfg.File}
	table := storage.CanonicalURI(cfg.Table.URI)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, topic := range cfg.Kafka.Topics {
		if other, taken := c.owners[tableTopic{table, topic}]; taken && other != me {
			return nil, fmt.Errorf("claim table %s for topic %s: pipeline %s (%s) already writes that topic into this table, so pipeline %s (%s) would write every record a second time: %w",
				cfg.Table.URI, topic, other.pipeline, other.file, cfg.Name, cfg.File, ErrTableClaimed)
		}
	}
	var mine []tableTopic
	for _, topic := range cfg.Kafka.Topics {
		k := tableTopic{table, topic}
		if _, taken := c.owners[k]; !taken {
			c.owners[k] = me
			mine = append(mine, k)
		}
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, k := range mine {
			delete(c.owners, k)
		}
	}, nil
}
